"""CURVE certificate files, as pyzmq (and czmq, whose format it follows) write and read them.

A certificate is a small ZPL file (ZeroMQ RFC 4): ``#`` comments, then a ``metadata`` section
of ``name = "value"`` lines and a ``curve`` section holding ``public-key`` and, in the secret
certificate only, ``secret-key``, both 40 Z85 characters::

    metadata
        name = "server"
    curve
        public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"

:func:`create_certificates` writes ``NAME.key`` (public) and ``NAME.key_secret`` (both keys;
readable by its owner only); :func:`load_certificates` reads every ``*.key`` in a directory, as
czmq's certificate store does.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from ..curve import curve_keypair
from ..utils import z85

StrPath = str | os.PathLike[str]

_SECRET_BANNER = """\
#   ****  Generated on {now} by brokerless  ****
#   ZeroMQ CURVE **Secret** Certificate
#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

"""
_PUBLIC_BANNER = """\
#   ****  Generated on {now} by brokerless  ****
#   ZeroMQ CURVE Public Certificate
#   Exchange securely, or use a secure mechanism to verify the contents
#   of this file after exchange. Store public certificates in your home
#   directory, in the .curve subdirectory.

"""


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _certificate(
    banner: str,
    public_key: bytes,
    secret_key: bytes | None = None,
    metadata: dict[str, str] | dict[bytes, bytes] | None = None,
) -> str:
    lines = [banner.format(now=datetime.datetime.now()), "metadata\n"]
    for name, value in (metadata or {}).items():
        lines.append(f'    {_text(name)} = "{_text(value)}"\n')
    lines += ["curve\n", f'    public-key = "{_text(public_key)}"\n']
    if secret_key is not None:
        lines.append(f'    secret-key = "{_text(secret_key)}"\n')
    return "".join(lines)


def _write(path: str, text: str, mode: int) -> None:
    """Write ``path`` afresh, created with ``mode`` (an existing file gets it too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), mode)
        f.write(text)


def create_certificates(
    key_dir: StrPath, name: str, metadata: dict[str, str] | dict[bytes, bytes] | None = None
) -> tuple[str, str]:
    """Make a new key pair and write it as ``key_dir/name.key`` (the public certificate) and
    ``key_dir/name.key_secret`` (both keys and ``metadata``, mode 0600).

    Returns the two paths: (public certificate, secret certificate).
    """
    public_key, secret_key = curve_keypair()
    base = os.path.join(key_dir, name)
    public_file, secret_file = f"{base}.key", f"{base}.key_secret"
    _write(public_file, _certificate(_PUBLIC_BANNER, public_key), 0o644)
    _write(secret_file, _certificate(_SECRET_BANNER, public_key, secret_key, metadata), 0o600)
    return public_file, secret_file


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _key(filename: StrPath, name: str, value: str) -> bytes:
    key = _unquote(value).encode("ascii", "replace")
    try:
        valid = len(key) == 40 and len(z85.decode(key)) == 32
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(f"{filename}: {name} is not a CURVE key (40 Z85 characters): {key!r}")
    return key


def load_certificate(filename: StrPath) -> tuple[bytes, bytes | None]:
    """The (public, secret) keys of a certificate file, each 40 Z85 characters; the secret is
    None in a public certificate.

    OSError when the file cannot be read; ValueError when it holds no public key or a key that
    is not 40 Z85 characters.
    """
    if not os.path.isfile(filename):
        raise OSError(f"Invalid certificate file: {filename}")
    # As pyzmq reads one: a ``public-key``/``secret-key`` line counts wherever it stands --
    # in the ``curve`` section as czmq writes it, unindented, or in no section at all.
    keys: dict[str, bytes] = {}
    text = Path(filename).read_text(encoding="utf-8-sig", errors="replace")
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):  # (Z85 has "#": no comments after values)
            continue
        name, sep, value = stripped.partition("=")
        name = name.strip()
        if sep and name in ("public-key", "secret-key"):
            keys[name] = _key(filename, name, value)
            if len(keys) == 2:
                break
    if "public-key" not in keys:
        raise ValueError(f"No public key found in {filename}")
    return keys["public-key"], keys.get("secret-key")


def load_certificates(directory: StrPath = ".") -> dict[bytes, bool]:
    """The public keys of every ``*.key`` certificate in ``directory``, as a set-like dict
    ``{public key: True}``.  OSError when ``directory`` is not a directory."""
    if not os.path.isdir(directory):
        raise OSError(f"Invalid certificate directory: {directory}")
    return {load_certificate(path)[0]: True for path in sorted(Path(directory).glob("*.key"))}


__all__ = ["create_certificates", "load_certificate", "load_certificates"]
