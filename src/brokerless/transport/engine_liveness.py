"""Whether the peer is still there: the handshake deadline and ZMTP heartbeats.

HANDSHAKE_IVL bounds the greeting and the security handshake; a peer that stalls there is
dropped.  Once in traffic, with HEARTBEAT_IVL set (and a ZMTP 3.x peer: older ones have no
heartbeats), the engine sends a PING every interval and drops a peer silent for longer than
the interval plus HEARTBEAT_TIMEOUT; a peer's own PING may ask to be dropped after its TTL of
silence.  Timers live in the I/O thread; a cancelled one drops its callback, so a closed
engine is not kept alive by them.

Silence is what the peer did, not what this thread saw: a timer may come due while the thread
was held up (a loaded machine, a long garbage collection) and run before the socket is read,
so a peer that seems silent is dropped only if nothing of its waits unread either (a peek).
"""

from __future__ import annotations

import socket
import time

from ..zmtp import TRAFFIC, Ready
from .engine_state import EngineState


class LivenessMixin(EngineState):
    """Handshake deadline and heartbeats (see the module docstring)."""

    _handshake_ivl: float
    _heartbeat_ivl: float
    _heartbeat_timeout: float
    _heartbeat_ttl: int

    def _start_handshake_timer(self) -> None:
        if self._handshake_ivl > 0:
            self._timers["handshake"] = self.io.call_later(
                self._handshake_ivl, self._handshake_expired
            )

    def _handshake_done(self, peer: Ready) -> None:
        timer = self._timers.pop("handshake", None)
        if timer:
            timer.cancel()
        self.session.engine_ready(self, peer)
        if self.alive and self._heartbeat_ivl > 0 and self.conn.heartbeats:  # none for ZMTP < 3
            self._timers["ping"] = self.io.call_later(self._heartbeat_ivl, self._send_ping)

    def _handshake_expired(self) -> None:
        if self.conn.state is not TRAFFIC:
            self.fail("handshake did not complete within HANDSHAKE_IVL")

    def _send_ping(self) -> None:
        if not self.alive:
            return
        if self._heartbeat_timeout > 0 and self._silent_for(
            self._heartbeat_ivl + self._heartbeat_timeout
        ):
            self.fail("heartbeat timed out: no traffic from the peer")
            return
        with self.out_lock:
            self.conn.send_ping(self._heartbeat_ttl // 100)
            self._write_command(self.conn.data_to_send())
        self._timers["ping"] = self.io.call_later(self._heartbeat_ivl, self._send_ping)

    def _silent_for(self, limit: float) -> bool:
        """Nothing came from the peer for ``limit`` seconds, and nothing of its waits unread
        (see the module docstring): an error or the end of the stream is left to the read.
        Nor while the socket's thread waits in a read for a large body's rest, which takes in
        what comes unseen by the peek, nor for ``limit`` after that wait's end."""
        if time.monotonic() - max(self._last_rx, self._read_until) < limit:
            return False
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)  # (see engine_lent)
        except BlockingIOError:
            return True
        except OSError:
            pass
        return False

    def _peer_ttl(self, ttl_deciseconds: int) -> None:
        """The peer asked to be dropped if it stays silent for its TTL (from its PING)."""
        old = self._timers.pop("ttl", None)
        if old:
            old.cancel()
        if ttl_deciseconds:
            self._watch_ttl(ttl_deciseconds / 10)

    def _watch_ttl(self, ttl: float) -> None:
        def expired() -> None:
            if self._silent_for(ttl):
                self.fail("the peer's heartbeat TTL expired")
            elif self.alive:
                # again when the TTL is up, but not sooner than a tenth of it: what waits
                # unread may stay so while the socket's pipe is full
                wait = ttl - (time.monotonic() - self._last_rx)
                self._timers["ttl"] = self.io.call_later(max(wait, ttl / 10), expired)

        self._timers["ttl"] = self.io.call_later(ttl, expired)
