"""``brokerless bench`` and ``brokerless demo``: the programs that come with brokerless.

The benchmarks live in the repository's ``bench/`` folder, not in the package: they compare
against pyzmq, start their tools as scripts in fresh processes, and are a developer's
instrument rather than part of the library.  So ``bench`` runs ``bench/compare.py`` of a
source checkout -- the one this brokerless was installed from (``pip install -e``), or
``--bench-dir``/``$BROKERLESS_BENCH_DIR`` -- and says how to get one when there is none.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import click

import brokerless

#: Where ``bench/`` is when brokerless is imported from a source checkout (src layout).
_CHECKOUT_BENCH = Path(brokerless.__file__).resolve().parent.parent.parent / "bench"


def find_bench(directory: str | None) -> Path:
    """``compare.py`` in ``directory``, ``$BROKERLESS_BENCH_DIR`` or the source checkout."""
    given = directory or os.environ.get("BROKERLESS_BENCH_DIR")
    folder = Path(given) if given else _CHECKOUT_BENCH
    script = folder / "compare.py"
    if not script.is_file():
        where = (
            f"{folder} has no compare.py"
            if given
            else ("this brokerless is not installed from a source checkout")
        )
        raise click.ClickException(
            f"the benchmarks are in the repository's bench/ folder, not in the package, and "
            f"{where}: clone the repository and run `pip install -e '.[bench]'` there, or pass "
            "--bench-dir PATH/TO/bench"
        )
    return script


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="""\b
Examples:
  brokerless bench --quick --rounds 2                # a smoke run, a minute or so
  brokerless bench --cases 'tcp-thr-*' --plot tcp.png
  brokerless bench --list                            # the cases
Every other option is bench/compare.py's (brokerless bench --help-compare).""",
)
@click.option("--plot", metavar="FILE.png", help="Also draw the ratios per case (matplotlib).")
@click.option(
    "--bench-dir",
    type=click.Path(file_okay=False),
    help="The bench/ folder of a brokerless checkout.",
)
@click.option("--help-compare", is_flag=True, help="Show compare.py's own options.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(
    plot: str | None, bench_dir: str | None, help_compare: bool, args: tuple[str, ...]
) -> int:
    """brokerless against pyzmq, side by side (bench/compare.py): a Markdown table on stdout,
    progress on stderr."""
    script = find_bench(bench_dir)
    command = [sys.executable, str(script), *args]
    if plot:
        command += ["--plot", plot]
    if help_compare:
        command = [sys.executable, str(script), "--help"]
    # Its own process group: Ctrl-C reaches it once, from here, not also from the terminal.
    process = subprocess.Popen(command, start_new_session=True)
    try:
        return process.wait()
    except KeyboardInterrupt:  # compare.py kills its running trial and exits
        process.send_signal(signal.SIGINT)
        process.wait()
        raise


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="""\b
Examples:
  brokerless demo                                     # Spark local mode, 2 workers
  brokerless demo --workers 3 --lines 2000 --top 5
  brokerless demo --master spark://host:7077""",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def demo(args: tuple[str, ...]) -> int:
    """The demo pipeline: running top words of a book, a topology on Spark (needs the spark
    extra and Java 17+).  Options are the demo's own: brokerless demo --help-demo."""
    try:
        from brokerless.spark import demo as program
    except ImportError as exc:
        raise click.ClickException(
            f"the demo runs on Spark ({exc}): install the spark extra (in a brokerless "
            "clone: pip install -e '.[spark]'), and have a Java runtime, 17 or later"
        ) from None
    argv = ["--help" if a == "--help-demo" else a for a in args]
    try:
        return program.main(argv)
    except SystemExit as exit:  # argparse's --help and usage errors
        return exit.code if isinstance(exit.code, int) else 2
