"""CURVE keys as pyzmq gives them: ``curve_keypair()`` and ``curve_public(secret)``, Z85-encoded.

The keys are Curve25519 key pairs made by libsodium (through PyNaCl), as libzmq makes them.
"""

from __future__ import annotations

from .errno import EINVAL
from .error import ZMQError
from .utils import z85


def curve_keypair() -> tuple[bytes, bytes]:
    """A new key pair: (public, secret), each 40 Z85 characters."""
    import nacl.bindings as sodium

    public, secret = sodium.crypto_box_keypair()
    return z85.encode(public), z85.encode(secret)


def curve_public(secret_key: bytes | str) -> bytes:
    """The public key (40 Z85 characters) of a secret key given as 40 Z85 characters."""
    import nacl.bindings as sodium

    if isinstance(secret_key, str):
        secret_key = secret_key.encode("utf8")
    if len(secret_key) != 40:
        raise ValueError("secret key must be a 40 byte z85 encoded string")
    try:
        secret = z85.decode(secret_key)
    except ValueError:  # (libzmq's zmq_curve_public fails so, and pyzmq raises its errno)
        raise ZMQError(
            EINVAL, f"Invalid argument: the secret key is not Z85: {secret_key!r}"
        ) from None
    return z85.encode(sodium.crypto_scalarmult_base(secret))
