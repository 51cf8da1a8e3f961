"""ZAP authentication (pyzmq's ``zmq.auth``): an :class:`Authenticator` deciding who may connect
to a context's PLAIN, CURVE and ZAP-domain NULL servers, and CURVE certificate files.

Serve it from a thread (:mod:`brokerless.auth.thread`), on the running asyncio loop
(:mod:`brokerless.auth.asyncio`), or by hand with :meth:`Authenticator.handle_zap_message`.
"""

from __future__ import annotations

from .base import CURVE_ALLOW_ANY, Authenticator
from .certs import create_certificates, load_certificate, load_certificates

__all__ = [
    "CURVE_ALLOW_ANY",
    "Authenticator",
    "create_certificates",
    "load_certificate",
    "load_certificates",
]
