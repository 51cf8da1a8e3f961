"""Utilities with pyzmq's names (``zmq.utils.z85``)."""
