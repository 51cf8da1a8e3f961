"""The demo pipeline: the running top words of The Adventures of Sherlock Holmes, on Spark.

    python -m brokerless.spark.demo [--workers 2] [--master local[2]] [--top 10]
                                    [--lines N] [--rate LINES_PER_S] [--min-length N]

The topology (:func:`sherlock_topology`)::

    lines --shuffle--> split --fields(word)--> count --global--> top ==PUB==> driver (SUB)

* ``lines`` streams the book's non-blank lines (shipped with the package, ``data/``), reliably:
  a line's message id is its number, a failed line is emitted again, and the spout is
  exhausted once every line is acked -- so the input can be replayed from the start, which is
  how a restarted run recovers (see ``topology.py``).
* ``split`` turns a line into words: lowercased, punctuation stripped (:func:`words`).
* ``count`` keeps a running count per word; the fields grouping sends every occurrence of a
  word to the same one of its 4 tasks (2 executors).
* ``top`` (one task, global grouping) keeps the latest count of every word and publishes the
  current top words on a brokerless PUB socket, a few times a second and once more when it
  stops.  Its PUB connects to a SUB the driver binds at ``spark.driver.host``, so it works
  wherever Spark places the task.

The driver shows a live display (lines done, words per second, the current top words; redrawn
in place on a terminal, a line every two seconds otherwise), stops the run when every line is
acked and every tuple processed, and prints the final top words -- checked against a plain
``collections.Counter`` over the same text.  Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import re
import secrets
import sys
import time
from collections.abc import Sequence
from functools import lru_cache, partial
from importlib import resources
from typing import Any, TextIO

import msgpack

import brokerless as zmq
from brokerless.stream import Bolt, Config, Topology, TopologyContext, fields, global_, shuffle
from brokerless.stream.examples import CountBolt, SentenceSpout
from brokerless.stream.messaging import tcp_endpoint
from brokerless.stream.tuple import Tuple

TITLE = "The Adventures of Sherlock Holmes"
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
_TOPIC = b"top"
#: Limits on what the demo's sockets take in: the publisher only subscriptions, the display
#: the top-words reports.
_SUBSCRIPTION_MAX_BYTES = 64 << 10
_REPORT_MAX_BYTES = 1 << 20
_TTY_REFRESH = 0.25  # seconds between redraws on a terminal
_LINE_REFRESH = 2.0  # seconds between progress lines otherwise


def words(line: str) -> list[str]:
    """A line's words: lowercased, without punctuation or digits; an apostrophe inside a word
    stays ("don't", "holmes's")."""
    return _WORD.findall(line.lower())


@lru_cache(maxsize=4)
def book_lines(limit: int | None = None) -> tuple[str, ...]:
    """The book's non-blank lines (the first ``limit`` of them), from the package's data."""
    text = resources.files(__package__).joinpath("data").joinpath("sherlock.txt").read_text("utf-8")
    lines = tuple(line for line in text.splitlines() if line.strip())
    return lines if limit is None else lines[:limit]


def word_counts(limit: int | None = None, min_length: int = 1) -> collections.Counter[str]:
    """What the topology should count: a plain Counter over the same lines."""
    return collections.Counter(w for line in book_lines(limit) for w in words(line)
                               if len(w) >= min_length)


def top_words(counts: dict[str, int], n: int) -> list[tuple[str, int]]:
    """The ``n`` most frequent words, ties in alphabetical order."""
    return heapq.nsmallest(n, counts.items(), key=lambda wc: (-wc[1], wc[0]))


class LineSpout(SentenceSpout):
    """The book's non-blank lines (the first ``limit``), each once and reliably: message id =
    line number, a failed line is emitted again, exhausted once all are acked.  ``rate``: at
    most that many lines per second (per task)."""

    outputs = ["line"]

    def __init__(self, limit: int | None = None, rate: float | None = None) -> None:
        super().__init__(())
        self.limit = limit
        self.rate = rate

    def open(self, conf: Config, context: TopologyContext) -> None:
        self.items = list(book_lines(self.limit))
        super().open(conf, context)
        self._opened = time.monotonic()
        self._emitted = 0

    def next_tuple(self) -> None:
        if self.rate is not None and self._emitted >= self.rate * (
            time.monotonic() - self._opened
        ):
            return
        left = len(self.todo)
        super().next_tuple()
        self._emitted += left - len(self.todo)


class SplitWords(Bolt):
    """A line -> its words (see :func:`words`) at least ``min_length`` letters long."""

    outputs = ["word"]

    def __init__(self, min_length: int = 1) -> None:
        self.min_length = min_length

    def process(self, tup: Tuple) -> None:
        for word in words(tup["line"]):
            if len(word) >= self.min_length:
                self.emit([word])


class TopWords(Bolt):
    """Keeps the latest count of every word (one task sees them all) and publishes the top
    ``n`` on a PUB socket connected to ``endpoint`` (none: does not publish) at most every
    ``interval`` seconds (the first an interval after its first tuple), and once more, marked
    final, when it stops.  A message is
    ``[b"top", msgpack {"top": [[word, count], ...], "words": words counted, "distinct": n,
    "final": bool, "token": token}]``; the driver reads only reports carrying its run's
    ``token``."""

    def __init__(self, n: int = 10, endpoint: str | None = None, interval: float = 0.2,
                 token: str = "") -> None:
        self.n = n
        self.endpoint = endpoint
        self.interval = interval
        self.token = token

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.counts: dict[str, int] = {}
        self.updates = 0
        # When the last report went (None: no tuple yet).  The first goes an interval after the
        # first tuple: one sent at once would rank a single word counted once.
        self._published: float | None = None
        self._context: zmq.SyncContext | None = None
        self._pub: zmq.SyncSocket | None = None
        if self.endpoint:
            self._context = zmq.Context()
            self._pub = self._context.socket(zmq.PUB)
            self._pub.linger = 2000  # the final message leaves before the task ends
            self._pub.maxmsgsize = _SUBSCRIPTION_MAX_BYTES
            self._pub.connect(self.endpoint)

    def process(self, tup: Tuple) -> None:
        word, count = tup.values
        if count > self.counts.get(word, 0):
            self.counts[word] = count
        self.updates += 1
        now = time.monotonic()
        if self._published is None:
            self._published = now
        elif now - self._published >= self.interval:
            self._published = now
            self._publish(final=False)

    def _publish(self, final: bool) -> None:
        if self._pub is not None:
            report = {"top": top_words(self.counts, self.n), "words": self.updates,
                      "distinct": len(self.counts), "final": final, "token": self.token}
            self._pub.send_multipart([_TOPIC, msgpack.packb(report)])

    def cleanup(self) -> None:
        if self._pub is not None:
            self._publish(final=True)
            self._pub.close()
        if self._context is not None:
            self._context.term()


def sherlock_topology(
    *,
    lines: int | None = None,
    rate: float | None = None,
    top: int = 10,
    publish_to: str | None = None,
    min_length: int = 1,
    token: str = "",
) -> Topology:
    """The demo's topology (see the module doc) over the first ``lines`` lines (all: None)."""
    return (
        Topology("sherlock-top-words")
        .spout("lines", partial(LineSpout, lines, rate))
        .bolt("split", partial(SplitWords, min_length), parallelism=2,
              inputs={"lines": shuffle()})
        .bolt("count", CountBolt, parallelism=2, tasks=4, inputs={"split": fields("word")})
        .bolt("top", partial(TopWords, top, publish_to, token=token),
              inputs={"count": global_()})
    )


# -- the driver ---------------------------------------------------------------------------------


class Display:
    """The live progress display: redrawn in place on a terminal, a line now and then
    otherwise."""

    def __init__(self, out: TextIO, total: int, top: int) -> None:
        self.out = out
        self.tty = out.isatty()
        self.total = total
        self.top = top
        self.refresh = _TTY_REFRESH if self.tty else _LINE_REFRESH
        self.started = time.monotonic()
        self._drawn = 0  # lines drawn last time (terminal)
        self._last: tuple[float, int] = (self.started, 0)

    def show(self, lines_done: int, counted: int, attempt: int, ranking: list[Any]) -> None:
        now = time.monotonic()
        then, before = self._last
        rate = (counted - before) / (now - then) if now > then and counted >= before else 0.0
        self._last = (now, counted)
        share = 100 * lines_done / max(1, self.total)
        done = f"{lines_done:,}/{self.total:,} lines ({share:.0f}%)"
        head = (f"[{now - self.started:5.1f} s] {done}, {counted:,} words counted, "
                f"{rate:,.0f} words/s" + (f", attempt {attempt}" if attempt > 1 else ""))
        if self.tty:
            rows = [head, *(f"  {i:2}. {w:<14} {c:>6,}" for i, (w, c) in enumerate(ranking, 1))]
            up = f"\x1b[{self._drawn}F" if self._drawn else ""
            self.out.write(up + "\x1b[J" + "\n".join(rows) + "\n")
            self._drawn = len(rows)
        else:
            leaders = ", ".join(f"{w} {c:,}" for w, c in ranking[:5]) or "(none yet)"
            self.out.write(f"{head}; top: {leaders}\n")
        self.out.flush()

    def close(self) -> None:
        """Erase the live view on a terminal (the final report replaces it)."""
        if self.tty and self._drawn:
            self.out.write(f"\x1b[{self._drawn}F\x1b[J")
            self.out.flush()
            self._drawn = 0


def run_demo(
    *,
    workers: int = 2,
    master: str | None = None,
    spark: Any = None,
    top: int = 10,
    lines: int | None = None,
    rate: float | None = None,
    min_length: int = 1,
    out: TextIO | None = None,
    timeout: float = 600.0,
) -> list[tuple[str, int]]:
    """Run the demo (see the module doc) and return the final top words.  ``spark``: a
    session to run on; else one is started on ``master`` (default ``local[workers]``) and
    stopped at the end."""
    from .endpoints import bind_address
    from .topology import SparkRun, session_builder

    out = out or sys.stdout
    total = len(book_lines(lines))
    began = time.monotonic()
    session = spark
    if session is None:
        master = master or f"local[{workers}]"
        out.write(f"starting Spark ({master}) ...\n")
        out.flush()
        session = (session_builder(master, "brokerless-demo")
                   .config("spark.ui.enabled", "false").getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.linger = 0
    sub.maxmsgsize = _REPORT_MAX_BYTES
    try:
        host = session.sparkContext.getConf().get("spark.driver.host")
        sub.bind(tcp_endpoint(bind_address(host), 0))
        sub.subscribe(_TOPIC)
        port = int(sub.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
        token = secrets.token_hex(16)  # the SUB listens on every interface: whose report?
        topology = sherlock_topology(lines=lines, rate=rate, top=top,
                                     publish_to=tcp_endpoint(host, port),
                                     min_length=min_length, token=token)
        with SparkRun(topology, workers=workers, spark=session) as run:
            out.write(f"{TITLE}: {total:,} lines -> split -> count -> top {top}, "
                      f"{workers} workers on Spark {session.sparkContext.master} "
                      f"(started in {time.monotonic() - began:.1f} s)\n")
            out.flush()
            display = Display(out, total, top)
            final = _follow(run, sub, token, display, timeout)
            running = time.monotonic() - display.started
            display.close()
        ranking = [(word, count) for word, count in final["top"]]
        elapsed = time.monotonic() - began
        out.write(f"\nTop {top} words of {TITLE} ({total:,} lines, {final['words']:,} words, "
                  f"{final['distinct']:,} distinct; {workers} workers counted "
                  f"{final['words'] / running:,.0f} words/s, {elapsed:.1f} s in all"
                  + (f", {run.attempt} attempts" if run.attempt > 1 else "") + "):\n")
        for i, (word, count) in enumerate(ranking, 1):
            out.write(f"  {i:2}. {word:<14} {count:>6,}\n")
        expected = top_words(word_counts(lines, min_length), top)
        out.write("Equal to a plain collections.Counter over the same text.\n"
                  if ranking == expected else
                  f"NOT equal to a plain collections.Counter over the text: {expected}\n")
        out.flush()
        return ranking
    finally:
        sub.close()
        context.term()
        if spark is None:
            session.stop()


def _report(sub: zmq.SyncSocket, token: str) -> dict[str, Any] | None:
    """The next message on ``sub`` if it is a report of this run's top bolt, else None
    (anything else reaching the port is skipped)."""
    frames = sub.recv_multipart()
    try:
        report = msgpack.unpackb(frames[-1])
    except Exception:
        return None
    if len(frames) != 2 or not isinstance(report, dict) or report.get("token") != token:
        return None
    return report


def _follow(run: Any, sub: zmq.SyncSocket, token: str, display: Display, timeout: float
            ) -> dict[str, Any]:
    """Show progress until the run is done; stop it; return the top bolt's final report."""
    latest: dict[str, Any] = {"top": [], "words": 0, "distinct": 0}
    deadline = time.monotonic() + timeout
    shown = 0.0
    while not run.done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo did not finish within {timeout:g} s")
        if sub.poll(int(display.refresh * 1000 / 2)):
            while sub.poll(0):  # (a final report now is an old attempt's: only shown)
                latest = _report(sub, token) or latest
        now = time.monotonic()
        if now - shown >= display.refresh:
            shown = now
            stats = run.statistics()
            lines_done = stats["lines"].acked
            # Once every line is acked the top bolt has counted everything, but its latest
            # report may be older: the last frame shows its final report instead (below).
            if lines_done < display.total:
                display.show(lines_done, stats["count"].processed, run.attempt, latest["top"])
    run.stop()  # the top bolt publishes its final report as it stops
    while sub.poll(10_000):
        report = _report(sub, token)
        if report is not None and report["final"]:  # the last frame agrees with the table
            display.show(display.total, report["words"], run.attempt, report["top"])
            return report
    raise TimeoutError("the top bolt's final report did not arrive")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m brokerless.spark.demo",
        description=f"Running top words of {TITLE}: a brokerless topology on Spark.")
    parser.add_argument("--workers", type=int, default=2, help="worker tasks (default 2)")
    parser.add_argument("--master", default=None,
                        help="Spark master URL (default local[WORKERS])")
    parser.add_argument("--top", type=int, default=10, help="how many top words (default 10)")
    parser.add_argument("--lines", type=int, default=None,
                        help="only the first LINES non-blank lines (default: the whole book)")
    parser.add_argument("--rate", type=float, default=None,
                        help="at most RATE lines per second (default: as fast as it goes)")
    parser.add_argument("--min-length", type=int, default=1,
                        help="count only words at least this long (default 1)")
    args = parser.parse_args(argv)
    for name in ("workers", "top", "lines", "rate"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} must be positive, not {value}")
    try:
        run_demo(workers=args.workers, master=args.master, top=args.top, lines=args.lines,
                 rate=args.rate, min_length=args.min_length)
    except KeyboardInterrupt:
        print("\ninterrupted: the topology was stopped", flush=True)
        return 130
    return 0


if __name__ == "__main__":
    from brokerless.spark.demo import main as _main  # the module under its own name, so the
                                                     # topology's classes pickle by reference
    sys.exit(_main())
