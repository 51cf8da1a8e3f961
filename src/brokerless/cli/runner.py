"""Running a click command as a program: exit statuses, Ctrl-C and a closed stdout (see
``brokerless.cli``'s module doc), for ``brokerless`` and ``brokerless-stream`` alike."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from .status import BROKEN_PIPE, INTERRUPTED, TERMINATED

#: The environment variable through which click's shell completion asks for completions.
COMPLETE_VAR = "_BROKERLESS_COMPLETE"


class Terminated(KeyboardInterrupt):
    """SIGTERM, where a command takes it as Ctrl-C (see :func:`sigterm_interrupts`)."""


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within: SIGTERM (``kill``, ``timeout``, ``docker stop``) is taken as Ctrl-C is -- the
    command stops what it runs and cleans up -- and the program's status is ``TERMINATED``."""

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Program(click.Group):
    """The group of commands run as a program (``brokerless``, ``brokerless-stream``): a
    command whose reader of stdout went away (``| head``) ends with ``BROKEN_PIPE``, quietly
    (click's own handling of it exits with 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_stdout()
            raise click.exceptions.Exit(BROKEN_PIPE) from None


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it on the way out does not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run_command(command: click.Command, argv: Sequence[str] | None, name: str) -> int:
    """Run ``command`` as a program named ``name``; returns the exit status (see the module
    doc): errors are reported without a traceback, Ctrl-C is 130."""
    try:
        status = command.main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name=name,
            complete_var=COMPLETE_VAR,
            standalone_mode=False,
        )
    except click.exceptions.Abort as exc:  # click's name for KeyboardInterrupt
        return TERMINATED if isinstance(exc.__cause__, Terminated) else INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except BrokenPipeError:  # the reader of stdout went away (| head): nothing to say
        _quiet_stdout()  # (outside a command: shell completion's output)
        return BROKEN_PIPE
    return status if isinstance(status, int) else 0
