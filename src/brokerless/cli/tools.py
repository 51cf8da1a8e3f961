"""``brokerless proxy`` and ``brokerless monitor``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator

import click

import brokerless as zmq
from brokerless.monitor import _HEADER as MONITOR_HEADER

from .endpoints import attach, option_settings, set_options, socket_type

#: Socket types ``monitor`` tries in turn when probing: between them every socket type a peer
#: may have accepts one (DEALER: REP, DEALER, ROUTER; SUB: PUB, XPUB; PULL: PUSH; PUSH: PULL;
#: PUB: SUB, XSUB; PAIR: PAIR).
PROBES = ("DEALER", "SUB", "PULL", "PUSH", "PUB", "PAIR")
_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)


@click.command(
    epilog="""\b
Examples:
  brokerless proxy tcp://*:5559 tcp://*:5560                  # ROUTER/DEALER broker
  brokerless proxy --front-type xsub --back-type xpub tcp://*:6000 tcp://*:6001
  brokerless proxy tcp://*:5559 tcp://*:5560 --capture tcp://*:5570
  brokerless sub tcp://localhost:5570                         # watch the capture

Endpoints are bound unless prefixed with '>' (connect)."""
)
@click.argument("front")
@click.argument("back")
@click.option(
    "--front-type",
    "front_type",
    default="router",
    show_default=True,
    help="The frontend's socket type.",
)
@click.option(
    "--back-type",
    "back_type",
    default="dealer",
    show_default=True,
    help="The backend's socket type.",
)
@click.option(
    "--capture",
    metavar="ENDPOINT",
    help="Also publish (PUB) a copy of every message, both ways, here.",
)
@option_settings("A socket option for both sockets (e.g. sndhwm=0); repeatable.")
def proxy(
    front: str,
    back: str,
    front_type: str,
    back_type: str,
    capture: str | None,
    options: tuple[str, ...],
) -> None:
    """Forward messages between FRONT and BACK (zmq_proxy), until Ctrl-C."""
    with zmq.Context() as context:
        sockets = []
        try:
            frontend = context.socket(socket_type(front_type))
            backend = context.socket(socket_type(back_type))
            sockets += [frontend, backend]
            for socket in sockets:
                set_options(socket, options)
            shown = [*attach(frontend, [front], True), *attach(backend, [back], True)]
            spy = None
            if capture:
                spy = context.socket(zmq.PUB)
                sockets.append(spy)
                shown += attach(spy, [capture], True)
            click.echo(
                f"proxy: {front_type.upper()} {shown[0]} <-> {back_type.upper()} {shown[1]}"
                + (f", capture PUB {shown[2]}" if spy is not None else ""),
                err=True,
            )
            zmq.proxy(frontend, backend, spy)
        finally:
            for socket in sockets:
                socket.close(linger=0)


def _events(monitor: zmq.SyncSocket) -> Iterator[tuple[int, int, str]]:
    while True:
        header, endpoint = monitor.recv_multipart()
        event, value = MONITOR_HEADER.unpack(header)
        yield event, value, endpoint.decode(errors="replace")


def _describe(event: int, value: int) -> str:
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
        return f"0x{value:08x}"
    return str(value)


@click.command(
    epilog="""\b
Examples:
  brokerless monitor tcp://localhost:5555             # probe: which type does it accept?
  brokerless monitor tcp://localhost:5556 --type sub --json
  brokerless monitor --bind --type pull tcp://*:5557  # watch peers come and go"""
)
@click.argument("endpoint")
@click.option(
    "--type",
    "type_name",
    default="probe",
    show_default=True,
    help="The socket type to connect with; 'probe' tries "
    + ", ".join(PROBES).lower()
    + " in turn until a handshake succeeds.",
)
@click.option("--bind", "-b", is_flag=True, help="Bind ENDPOINT (needs --type).")
@click.option("-n", "--count", type=click.IntRange(min=1), help="Stop after COUNT events.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def monitor(endpoint: str, type_name: str, bind: bool, count: int | None, as_json: bool) -> None:
    """Connect to ENDPOINT and print the socket's monitor events as they happen."""
    probing = type_name.lower() == "probe"
    if probing and bind:
        raise click.UsageError("--bind needs a --type: nothing to probe on a bound socket")
    candidates = PROBES if probing else (type_name,)
    shown = 0
    with zmq.Context() as context:
        for name in candidates:
            socket = context.socket(socket_type(name))
            events = socket.get_monitor_socket(zmq.EVENT_ALL)
            try:
                if probing:
                    click.echo(f"probe: connecting a {name} socket", err=True)
                attach(socket, [endpoint], bind)
                for event, value, where in _events(events):
                    if as_json:
                        line = json.dumps(
                            {
                                "time": time.time(),
                                "type": name.upper(),
                                "event": zmq.Event(event).name,
                                "value": value,
                                "endpoint": where,
                            }
                        )
                    else:
                        stamp = time.strftime("%H:%M:%S")
                        line = (
                            f"{stamp} {name.upper():6} {zmq.Event(event).name:26} "
                            f"{_describe(event, value):>10} {where}"
                        )
                    click.echo(line)
                    sys.stdout.flush()
                    shown += 1
                    if count is not None and shown >= count:
                        return
                    if event == zmq.EVENT_HANDSHAKE_SUCCEEDED and probing:
                        click.echo(f"probe: the peer accepts {name}", err=True)
                        probing = False  # found: go on watching with this socket
                    elif event & _FAILED and probing:
                        break  # refused: try the next type
            finally:
                socket.disable_monitor()
                events.close(linger=0)
                socket.close(linger=0)
    # only a probe leaves the loop without returning: every type was refused
    raise click.ClickException(f"the peer accepted none of {', '.join(PROBES)}")
