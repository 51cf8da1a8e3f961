"""pyzmq's ``zmq.log``: logging over PUB sockets (:mod:`brokerless.log.handlers`)."""
