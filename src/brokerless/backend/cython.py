"""pyzmq's Cython API (``zmq.backend.cython``, ``cimport zmq``) is a binding of libzmq's C API:
brokerless has no libzmq, so it has none, and importing this module says so."""

raise ImportError(
    "brokerless has no Cython API: pyzmq's zmq.backend.cython binds libzmq's C API, and "
    "brokerless is pure Python with no libzmq; build Cython code against pyzmq",
    name=__name__,
)
