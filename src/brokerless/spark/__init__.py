"""PySpark integration: a Structured Streaming source and sink for brokerless sockets."""
