"""The ``brokerless`` command (and ``python -m brokerless``).

    brokerless pub|sub|push|pull|req|rep|dealer|router ENDPOINT...   stdin/stdout <-> a socket
    brokerless proxy FRONT BACK [--capture EP]                        zmq_proxy
    brokerless monitor ENDPOINT                                       socket monitor events
    brokerless bench [--plot FILE.png]                                brokerless vs pyzmq
    brokerless demo                                                   the Spark demo pipeline
    brokerless stream run|list|ui|ps|kill|activate|deactivate         topologies
    brokerless completion bash|zsh|fish                               shell completion

Built on click: it is small (one pure-Python package, no dependencies of its own), stable for
a decade, and gives shell completion and nested commands without code of ours; typer would add
rich, shellingham and typing-extensions for the same.  Progress uses click's own echo.

Exit codes and Ctrl-C: 0 when a command did its work, 1 on an error (a clear message, no
traceback), 2 on a usage error, and 130 (128 + SIGINT, as a shell reports it) when Ctrl-C
stopped it (141 when the reader of its output went away: ``| head``; 143 when SIGTERM stopped
``stream run`` or ``stream ui``, which take it as Ctrl-C).  Every command closes its sockets on
the way out (a ``with`` or ``finally`` around them), so Ctrl-C leaves nothing behind and prints
no traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

import click
from click.shell_completion import get_completion_class

from .programs import bench, demo
from .runner import COMPLETE_VAR, Program, run_command
from .sockets import COMMANDS
from .tools import monitor, proxy
from .topologies import stream


@click.group(
    cls=Program,
    epilog="""\b
Examples:
  seq 5 | brokerless push tcp://localhost:5557        # lines become messages
  brokerless pull --bind tcp://*:5557                 # and messages lines
  brokerless sub tcp://localhost:5556 -t weather | grep rain
  brokerless proxy tcp://*:5559 tcp://*:5560 --capture tcp://*:5570
  brokerless monitor tcp://localhost:5555
  brokerless stream run brokerless.stream.examples:word_count --workers 2
  brokerless stream ui brokerless.stream.examples:word_count
  eval "$(brokerless completion bash)"                # shell completion

Each command has --help with examples.""",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="brokerless")
def cli() -> None:
    """ZeroMQ's brokerless messaging in pure Python: sockets from the shell, proxies,
    monitors, benchmarks, and Storm-style topologies."""


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(brokerless completion bash)"."""
    cls = get_completion_class(shell)
    assert cls is not None  # every choice is one of click's shells
    click.echo(cls(cli, {}, "brokerless", COMPLETE_VAR).source())


for _command in [*COMMANDS, proxy, monitor, bench, demo, stream]:
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(cli, argv, "brokerless")
