"""Whether the peer is still there: the handshake deadline and ZMTP heartbeats.

HANDSHAKE_IVL bounds the greeting and the security handshake; a peer that stalls there is
dropped.  Once in traffic, with HEARTBEAT_IVL set (and a ZMTP 3.x peer: older ones have no
heartbeats), the engine sends a PING every interval and drops a peer silent for longer than
the interval plus HEARTBEAT_TIMEOUT; a peer's own PING may ask to be dropped after its TTL of
silence.  Timers live in the I/O thread; a cancelled one drops its callback, so a closed
engine is not kept alive by them.
"""

from __future__ import annotations

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
        idle = time.monotonic() - self._last_rx
        if self._heartbeat_timeout > 0 and idle >= self._heartbeat_ivl + self._heartbeat_timeout:
            self.fail("heartbeat timed out: no traffic from the peer")
            return
        with self.out_lock:
            self.conn.send_ping(self._heartbeat_ttl // 100)
            self._queue(self.conn.data_to_send())
            self._flush()
        self._timers["ping"] = self.io.call_later(self._heartbeat_ivl, self._send_ping)

    def _peer_ttl(self, ttl_deciseconds: int) -> None:
        """The peer asked to be dropped if it stays silent for its TTL (from its PING)."""
        old = self._timers.pop("ttl", None)
        if old:
            old.cancel()
        if ttl_deciseconds:
            self._watch_ttl(ttl_deciseconds / 10)

    def _watch_ttl(self, ttl: float) -> None:
        def expired() -> None:
            silent = time.monotonic() - self._last_rx
            if silent >= ttl:
                self.fail("the peer's heartbeat TTL expired")
            elif self.alive:
                self._timers["ttl"] = self.io.call_later(ttl - silent, expired)

        self._timers["ttl"] = self.io.call_later(ttl, expired)
