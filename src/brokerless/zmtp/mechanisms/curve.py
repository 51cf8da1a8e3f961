"""CURVE (RFC 25, CurveZMQ RFC 26): authenticated, encrypted connections.

Theory of operation
-------------------
Every box is libsodium's ``crypto_box`` (Curve25519, XSalsa20, Poly1305) through PyNaCl;
nothing cryptographic is written here.  Each side has a permanent key pair (C, S) and makes a
short-term one per connection (C', S')::

    C: HELLO     C', short nonce, Box[64 zeros](C'->S)                       200 octets
    S: WELCOME   long nonce, Box[S' + cookie](S->C')                         168 octets
    C: INITIATE  cookie, short nonce, Box[C + vouch + metadata](C'->S')      257+ octets
                 vouch = long nonce, Box[C' + S](C->S')
    S: READY     short nonce, Box[metadata](S'->C')                          30+ octets
       MESSAGE   short nonce, Box[flags + frame](either way)                 33+ octets
                 (flags: MORE 0x01, and libzmq marks commands 0x02)

The server keeps nothing of its short-term key between WELCOME and INITIATE: ``s'`` travels
inside the cookie, a secret box under a cookie key only the server knows (:class:`CookieKeys`,
shared by the process and made anew every minute; a cookie opens for one to two minutes).  Per
connection it keeps the client's C' from HELLO (32 octets), to check the cookie came back on the
connection it was made for.  A cookie is spent by the first valid INITIATE that brings it, so a
captured INITIATE replayed on another connection is refused.  Before a valid INITIATE the peer
is anonymous and nothing it sends reaches the application.

Short nonces are 8-octet counters, prefixed per command; each side's must strictly increase
(HELLO, INITIATE, then MESSAGEs for the client; READY, then MESSAGEs for the server), so a
replayed or reordered command drops the connection.  After the handshake every frame travels as
one MESSAGE command carrying its flags (MORE, COMMAND) in the box; libzmq sends these in data
frames, and so does this module's connection.

The traffic boxes are the hot path: :meth:`CurveMechanism.encode_frame` lays out the whole data
frame (header, MESSAGE, nonce, MAC, flags, data) in one buffer and boxes it in place, and
:meth:`~CurveMechanism.decode_frame` opens into one buffer, by calling libsodium through PyNaCl's
own cffi module (``nacl._sodium``); PyNaCl's public functions copy each message three more
times and zero a fresh buffer for it, which more than halved the throughput of large messages.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import Any

import nacl.bindings as sodium

# PyNaCl's cffi module (libsodium itself) has no type stubs (pyproject.toml's mypy override):
# ffi and lib are untyped.
from nacl._sodium import ffi as _ffi
from nacl._sodium import lib as _lib
from nacl.exceptions import CryptoError

from ...constants import Event
from ..commands import READY, Command, command_body, encode_metadata, parse_metadata
from ..errors import CryptographicError, HandshakeError, InvalidSequence, ProtocolError
from ..frames import LONG
from .base import Mechanism
from .zap import ZapPolicy, ZapReply

KEY_SIZE = 32
HELLO = b"HELLO"
WELCOME = b"WELCOME"
INITIATE = b"INITIATE"
MESSAGE = b"MESSAGE"
MESSAGE_PREFIX = b"\x07MESSAGE"

_E = Event
_HELLO_SIZE = 194  # HELLO's data: version 2, padding 72, C' 32, nonce 8, box 80
_WELCOME_SIZE = 160  # nonce 16, box 144
_COOKIE_SIZE = 96  # nonce 16, box 80
_INITIATE_MIN = _COOKIE_SIZE + 8 + 144
_MAX_NONCE = (1 << 64) - 1
_MESSAGE_OVERHEAD = 8 + 8 + 16 + 1  # MESSAGE, short nonce, MAC, flags
# A MESSAGE's data frame up to its MAC: frame header, MESSAGE, short nonce.
_SHORT_HEAD = struct.Struct(">xB8sQ")
_LONG_HEAD = struct.Struct(">BQ8sQ")
_COUNTER = struct.Struct(">Q")
_ZEROS_64 = bytes(64)


def _malformed(command: bytes, code: int) -> HandshakeError:
    return HandshakeError(f"malformed CURVE {command.decode()} command", code)


def _open(box: bytes, nonce: bytes, public: bytes, secret: bytes, what: str) -> bytes:
    try:
        return sodium.crypto_box_open(box, nonce, public, secret)
    except CryptoError:
        raise CryptographicError(f"cannot open the {what} box (wrong key, or forged)") from None


class CookieKeys:
    """The server's cookie keys: the current one (made anew every ``lifetime`` seconds) and
    the one before it, and the cookies already spent under each.  Thread-safe: connections on
    every I/O thread of the process share one."""

    def __init__(self, lifetime: float = 60.0, clock: Any = time.monotonic) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: list[tuple[bytes, float, set[bytes]]] = []  # newest first

    def _current(self) -> list[tuple[bytes, float, set[bytes]]]:
        now = self._clock()
        keys = self._keys
        if not keys or now - keys[0][1] >= self.lifetime:
            keys.insert(0, (os.urandom(32), now, set()))
        del keys[2:]
        if len(keys) == 2 and now - keys[1][1] >= 2 * self.lifetime:
            del keys[1]
        return keys

    def seal(self, plaintext: bytes) -> bytes:
        """A cookie for ``plaintext``: 16 nonce octets, then the box."""
        with self._lock:
            key = self._current()[0][0]
        nonce = os.urandom(16)
        return nonce + sodium.crypto_secretbox(plaintext, b"COOKIE--" + nonce, key)

    def open(self, cookie: bytes) -> tuple[bytes, set[bytes]] | None:
        """The plaintext of a live, unspent cookie and the spent-set to record it in (None:
        expired, forged, or spent)."""
        nonce, box = cookie[:16], cookie[16:]
        with self._lock:
            keys = list(self._current())
        for key, _, spent in keys:
            try:
                plaintext = sodium.crypto_secretbox_open(box, b"COOKIE--" + nonce, key)
            except CryptoError:
                continue
            return (plaintext, spent) if nonce not in spent else None
        return None

    def spend(self, cookie: bytes, spent: set[bytes]) -> bool:
        """Record a cookie as used; False if another connection used it first."""
        with self._lock:
            if cookie[:16] in spent:
                return False
            spent.add(cookie[:16])
            return True


#: The process's cookie keys.
COOKIE_KEYS = CookieKeys()


class CurveMechanism(Mechanism):
    """What both roles share: the short nonces and the traffic boxes."""

    name = b"CURVE"
    encrypts = True
    #: The prefixes of the nonces this side sends MESSAGEs with, and its peer does.
    _send_prefix: bytes
    _recv_prefix: bytes

    def __init__(
        self,
        metadata: dict[str, bytes],
        as_server: bool,
        public_key: bytes,
        secret_key: bytes,
        zap: ZapPolicy | None = None,
    ) -> None:
        super().__init__(metadata, as_server, zap)
        _check_key(public_key, "public key")
        _check_key(secret_key, "secret key")
        self.public_key = public_key
        self.secret_key = secret_key
        self._nonce = 1  # the next short nonce to send
        self._peer_nonce = 0  # the last one received
        self._precomputed = b""  # the short-term keys' shared secret (beforenm)
        # The traffic's full nonces, rewritten in place for each MESSAGE (and their pointers).
        self._send_nonce = bytearray(self._send_prefix + bytes(8))
        self._recv_nonce = bytearray(self._recv_prefix + bytes(8))
        self._send_nonce_c = _ffi.from_buffer(self._send_nonce)
        self._recv_nonce_c = _ffi.from_buffer(self._recv_nonce)

    def _next_nonce(self) -> bytes:
        n = self._nonce
        if n > _MAX_NONCE:
            raise ProtocolError("CURVE short nonces exhausted: the connection must end")
        self._nonce = n + 1
        return n.to_bytes(8, "big")

    def _check_nonce(self, short: bytes) -> None:
        n = int.from_bytes(short, "big")
        if n <= self._peer_nonce:
            raise InvalidSequence(
                f"CURVE nonce {n} after {self._peer_nonce}: a replayed or reordered command"
            )
        self._peer_nonce = n

    def _box(self, prefix: bytes, plaintext: bytes) -> bytes:
        short = self._next_nonce()
        return short + sodium.crypto_box_easy_afternm(plaintext, prefix + short, self._precomputed)

    def _unbox(self, prefix: bytes, data: bytes, what: str) -> bytes:
        short = data[:8]
        self._check_nonce(short)
        try:
            return sodium.crypto_box_open_easy_afternm(data[8:], prefix + short, self._precomputed)
        except CryptoError:
            raise CryptographicError(f"cannot open the {what} box (forged or altered)") from None

    # -- traffic --------------------------------------------------------------------------------

    def encode_frame(self, flags: int, data: Any) -> bytearray:
        """One frame of the traffic as the data frame that carries it: header, MESSAGE, short
        nonce, then the box of ``flags`` and ``data`` (a buffer), boxed in place."""
        n = len(data)
        size = _MESSAGE_OVERHEAD + n
        short = self._nonce
        if short > _MAX_NONCE:
            raise ProtocolError("CURVE short nonces exhausted: the connection must end")
        self._nonce = short + 1
        if size < 256:
            head = 2
            frame = bytearray(head + size)
            _SHORT_HEAD.pack_into(frame, 0, size, MESSAGE_PREFIX, short)
        else:
            head = 9
            frame = bytearray(head + size)
            _LONG_HEAD.pack_into(frame, 0, LONG, size, MESSAGE_PREFIX, short)
        plain = head + 32  # after MESSAGE, the nonce and the MAC
        frame[plain] = flags
        frame[plain + 1 :] = data
        nonce = self._send_nonce
        _COUNTER.pack_into(nonce, 16, short)
        view = _ffi.from_buffer(frame)
        _lib.crypto_box_easy_afternm(
            view + (head + 16), view + plain, n + 1, self._send_nonce_c, self._precomputed
        )
        return frame

    def received_state(self) -> int:
        return self._peer_nonce

    def restore_received(self, state: int) -> None:
        self._peer_nonce = state

    def decode_frame(self, body: bytes) -> tuple[int, bytes]:
        """Flags and data of one MESSAGE command body (checked, opened, its nonce consumed)."""
        if not body.startswith(MESSAGE_PREFIX):
            raise HandshakeError(
                f"unexpected command {body[1 : 1 + body[0]]!r} on a CURVE connection"
                if body
                else "empty frame on a CURVE connection",
                _E.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
            )
        if len(body) < 33:
            raise ProtocolError(
                "malformed CURVE MESSAGE command", _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE
            )
        short = body[8:16]
        self._check_nonce(short)
        self._recv_nonce[16:] = short
        plain = bytearray(len(body) - _MESSAGE_OVERHEAD + 1)
        if _lib.crypto_box_open_easy_afternm(
            _ffi.from_buffer(plain),
            _ffi.from_buffer(body) + 16,
            len(body) - 16,
            self._recv_nonce_c,
            self._precomputed,
        ):
            raise CryptographicError("cannot open the MESSAGE box (forged or altered)")
        return plain[0], bytes(memoryview(plain)[1:])


class CurveClient(CurveMechanism):
    _send_prefix = b"CurveZMQMESSAGEC"
    _recv_prefix = b"CurveZMQMESSAGES"

    def __init__(
        self,
        metadata: dict[str, bytes],
        as_server: bool,
        public_key: bytes,
        secret_key: bytes,
        server_key: bytes,
    ) -> None:
        super().__init__(metadata, as_server, public_key, secret_key)
        _check_key(server_key, "server key")
        self.server_key = server_key
        self._short_public, self._short_secret = sodium.crypto_box_keypair()
        self._expect = WELCOME

    def start(self) -> list[bytes]:
        short = self._next_nonce()
        box = sodium.crypto_box(
            _ZEROS_64, b"CurveZMQHELLO---" + short, self.server_key, self._short_secret
        )
        return [command_body(HELLO, b"\x01\x00" + bytes(72) + self._short_public + short + box)]

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name != self._expect:
            raise self._unexpected(command)
        data = command.data
        if command.name == WELCOME:
            if len(data) != _WELCOME_SIZE:
                raise _malformed(WELCOME, _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME)
            plain = _open(
                data[16:], b"WELCOME-" + data[:16], self.server_key, self._short_secret, "WELCOME"
            )
            server_short, cookie = plain[:32], plain[32:]
            self._precomputed = sodium.crypto_box_beforenm(server_short, self._short_secret)
            self._expect = READY
            return [self._initiate(server_short, cookie)], None
        if len(data) < 24:
            raise _malformed(READY, _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY)
        self._expect = b""
        plain = self._unbox(b"CurveZMQREADY---", data, "READY")
        try:
            return [], parse_metadata(plain)
        except ProtocolError:
            raise HandshakeError(
                "malformed metadata in READY", _E.PROTOCOL_ERROR_ZMTP_INVALID_METADATA
            ) from None

    def _initiate(self, server_short: bytes, cookie: bytes) -> bytes:
        vouch_nonce = os.urandom(16)
        vouch = vouch_nonce + sodium.crypto_box(
            self._short_public + self.server_key,
            b"VOUCH---" + vouch_nonce,
            server_short,
            self.secret_key,
        )
        box = self._box(
            b"CurveZMQINITIATE", self.public_key + vouch + encode_metadata(self.metadata)
        )
        self._short_secret = b""  # only the precomputed secret is needed from now on
        return command_body(INITIATE, cookie + box)


class CurveServer(CurveMechanism):
    _send_prefix = b"CurveZMQMESSAGES"
    _recv_prefix = b"CurveZMQMESSAGEC"

    def __init__(
        self,
        metadata: dict[str, bytes],
        as_server: bool,
        secret_key: bytes,
        zap: ZapPolicy | None = None,
        cookies: CookieKeys = COOKIE_KEYS,
    ) -> None:
        # The server's public key is its secret key's: libzmq never reads CURVE_PUBLICKEY on a
        # server, so servers set up with the secret key alone are common, and the INITIATE
        # vouch is checked against the key the client must have been given.
        _check_key(secret_key, "secret key")
        public_key = sodium.crypto_scalarmult_base(secret_key)
        super().__init__(metadata, as_server, public_key, secret_key, zap)
        self._cookies = cookies
        self._client_short = b""  # C', from HELLO
        self._expect = HELLO
        self._peer: dict[str, bytes] = {}

    def start(self) -> list[bytes]:
        return []

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name != self._expect:
            raise self._unexpected(command)
        if command.name == HELLO:
            return [self._welcome(command.data)], None
        return self._initiate(command.data)

    def _welcome(self, data: bytes) -> bytes:
        if len(data) != _HELLO_SIZE or data[:2] != b"\x01\x00":
            raise _malformed(HELLO, _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO)
        client_short, short = data[74:106], data[106:114]
        self._check_nonce(short)
        if (
            _open(data[114:], b"CurveZMQHELLO---" + short, client_short, self.secret_key, "HELLO")
            != _ZEROS_64
        ):
            raise CryptographicError("HELLO signature box does not hold 64 zeros")
        server_short, server_short_secret = sodium.crypto_box_keypair()
        cookie = self._cookies.seal(client_short + server_short_secret)
        nonce = os.urandom(16)
        box = sodium.crypto_box(
            server_short + cookie, b"WELCOME-" + nonce, client_short, self.secret_key
        )
        self._client_short = client_short
        self._expect = INITIATE
        return command_body(WELCOME, nonce + box)

    def _initiate(self, data: bytes) -> tuple[list[bytes], dict[str, bytes] | None]:
        if len(data) < _INITIATE_MIN:
            raise _malformed(INITIATE, _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE)
        self._expect = b""
        cookie = data[:_COOKIE_SIZE]
        opened = self._cookies.open(cookie)
        if opened is None:
            raise CryptographicError("INITIATE brings an expired, forged or spent cookie")
        plain, spent = opened
        client_short, server_short_secret = plain[:32], plain[32:]
        if client_short != self._client_short:
            raise CryptographicError("INITIATE brings a cookie made for another connection")
        self._precomputed = sodium.crypto_box_beforenm(client_short, server_short_secret)
        box = self._unbox(b"CurveZMQINITIATE", data[_COOKIE_SIZE:], "INITIATE")
        client_key, vouch_nonce, vouch_box = box[:32], box[32:48], box[48:128]
        vouch = _open(
            vouch_box, b"VOUCH---" + vouch_nonce, client_key, server_short_secret, "vouch"
        )
        if vouch != client_short + self.public_key:
            raise HandshakeError(
                "the INITIATE vouch is not for this connection and server",
                _E.PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE,
            )
        try:
            self._peer = parse_metadata(box[128:])
        except ProtocolError:
            raise HandshakeError(
                "malformed metadata in INITIATE", _E.PROTOCOL_ERROR_ZMTP_INVALID_METADATA
            ) from None
        if not self._cookies.spend(cookie, spent):
            raise CryptographicError("INITIATE brings a cookie another connection spent")
        self.client_key = client_key
        if self.zap is not None:
            self._ask(self.name, client_key)
            return [], None
        return [self._ready()], self._peer

    def zap_replied(self, reply: ZapReply | None) -> tuple[list[bytes], dict[str, bytes] | None]:
        self._zap_verdict(reply)
        return [self._ready()], self._peer

    def _ready(self) -> bytes:
        return command_body(READY, self._box(b"CurveZMQREADY---", encode_metadata(self.metadata)))


def _check_key(key: bytes, what: str) -> None:
    if len(key) != KEY_SIZE:
        raise ValueError(f"a CURVE {what} is {KEY_SIZE} octets, not {len(key)}")
