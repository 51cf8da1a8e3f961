"""Spark I/O: the Structured Streaming source and sink (``format("brokerless")``) against plain
pyzmq loops doing the same I/O.

Three cases, each run for R interleaved rounds (the subject and its reference alternate which
goes first), every trial with fresh processes, directories and endpoint:

- ``source-alone``: the source's receiver (``brokerless.spark.source``: a brokerless PULL and a
  thread that appends every message to the write-ahead log, ``brokerless.spark.wal``, and
  flushes it once per drained batch) driven without Spark, in a process of its own, against
  the **I/O floor**: a plain pyzmq PULL loop that drains the same batches (at most 8192
  messages, the source's limit) and appends the same records -- the log's layout, written by
  hand -- to a file with one ``write`` and, with ``--fsync true``, one ``fsync`` per batch.
- ``source-spark``: the same source inside a local Spark streaming query
  (``readStream.format("brokerless")`` into the ``noop`` sink, ``--trigger``): Spark plans,
  reads and commits the log's records meanwhile and trims it; against the same floor.
- ``sink-spark``: ``df.writeStream.format("brokerless")`` (PUSH) from Spark's
  ``rate-micro-batch`` source (``--rows-per-batch`` rows a micro-batch, each row's payload its
  number left-padded to ``--size`` bytes) against a plain pyzmq PUSH loop in a Python process
  sending the same rows: ``[header, payload]``, the sink's 20-byte header and the same payload.

For the source a pyzmq PUSH process sends ``--size``-byte messages as fast as the receiver takes
them (the receiver binds, the sender connects).  Counted is what reaches the log: records
written (its files' sizes: every record here has the same size; with fsync a batch is written,
then fsync'd, so the count leads the durable one by at most one batch).  For the sink a pyzmq
PULL process binds and counts the messages it receives.  Either way the count starts
``--warmup`` seconds after the first message and runs for ``--seconds``: sustained rates, with
the pauses between Spark's micro-batches included.

    python bench/spark_io.py                                 # every case, 3 rounds (minutes)
    python bench/spark_io.py --cases source-alone --seconds 5 --rounds 5
    python bench/spark_io.py --fsync false --json

The report (Markdown) goes to stdout, progress to stderr; ``--json`` prints one JSON line
instead.  Spark needs Java 17 or later and the ``spark`` extra; the ``source-alone`` case needs
neither a JVM nor a session (only pyspark and pyarrow, which the source imports).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import cpu_model, interrupts_held
from _load import BusyProcessDied, Condition, busy, load_average

SCRIPT = Path(__file__).resolve()
FIRST_MESSAGE_TIMEOUT = 180.0  # s: a first Spark query also starts Spark's Python workers
POLL_S = 0.05  # how often the runner looks at a trial's processes and files
DRAIN = 8192  # messages per drained batch at most: the source's own limit


# -- the processes of a trial (--role) -----------------------------------------------------------


def role_sender(endpoint: str, size: int) -> None:
    """A pyzmq PUSH sending ``size``-byte messages as fast as its peer takes them, until killed."""
    import zmq

    sock = zmq.Context().socket(zmq.PUSH)
    sock.connect(endpoint)
    send, payload = sock.send, b"\0" * size
    while True:
        send(payload)


#: The write-ahead log's record: ``length u32 | crc32 u32 | body``, body ``seq u64 |
#: received_at i64 | nframes u32 | (frame length u32 | frame) * nframes`` (see wal.py).
_HEADER = struct.Struct(">II")
_BODY = struct.Struct(">QqI")
_FRAME = struct.Struct(">I")


def role_floor(endpoint: str, directory: str, fsync: bool) -> None:
    """The I/O floor: a pyzmq PULL draining batches into a file of log records, until killed."""
    import zmq

    sock = zmq.Context().socket(zmq.PULL)
    sock.bind(endpoint)
    recv, again, noblock = sock.recv_multipart, zmq.Again, zmq.NOBLOCK
    body, frame_length, header = _BODY.pack, _FRAME.pack, _HEADER.pack
    now_ns, crc32 = time.time_ns, zlib.crc32
    seq = 0
    with open(Path(directory) / f"{1:020d}.wal", "ab", buffering=0) as log:
        while True:
            if not sock.poll(100):
                continue
            pending = []
            for _ in range(DRAIN):
                try:
                    frames = recv(noblock)
                except again:
                    break
                seq += 1
                parts = [body(seq, now_ns() // 1000, len(frames))]
                for frame in frames:
                    parts += (frame_length(len(frame)), frame)
                record = b"".join(parts)
                pending += (header(len(record), crc32(record)), record)
            log.write(b"".join(pending))
            if fsync:
                os.fsync(log.fileno())


def role_reader(endpoint: str, directory: str, fsync: bool) -> None:
    """The source's receiver without Spark, until SIGTERM (then stopped as Spark stops it)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the receiver thread inherits it
    from brokerless.spark.source import BrokerlessStreamReader, SourceConfig

    reader = BrokerlessStreamReader(
        SourceConfig.from_options(source_options(endpoint, directory, fsync))
    )
    reader.reportLatestOffset()  # the first call on the driver side starts the receiver
    signal.sigwait({signal.SIGTERM})
    reader.stop()


def role_pull(endpoint: str, warmup: float, seconds: float) -> None:
    """Bind a pyzmq PULL; from ``warmup`` s after the first message, count messages for
    ``seconds`` s; print the rate as JSON and exit."""
    import zmq

    sock = zmq.Context().socket(zmq.PULL)
    sock.bind(endpoint)
    if not sock.poll(int(FIRST_MESSAGE_TIMEOUT * 1000)):
        raise SystemExit(f"error: no message within {FIRST_MESSAGE_TIMEOUT:g} s")
    frames = len(sock.recv_multipart())
    recv, again, noblock, poll = sock.recv_multipart, zmq.Again, zmq.NOBLOCK, sock.poll

    def drain_until(deadline: float) -> int:
        count = 0
        while (left := deadline - time.monotonic()) > 0:
            if poll(left * 1000):  # a pause between micro-batches ends at the deadline
                for _ in range(256):
                    try:
                        recv(noblock)
                    except again:
                        break
                    count += 1
        return count

    drain_until(time.monotonic() + warmup)
    start = time.monotonic()
    count = drain_until(start + seconds)
    elapsed = time.monotonic() - start
    print(json.dumps({"rate": count / elapsed, "count": count, "frames": frames}), flush=True)
    os._exit(0)  # no linger: the sender is stopped next


def role_push(endpoint: str, size: int) -> None:
    """A plain pyzmq PUSH sending the sink's messages for row 0, 1, 2, ..., until killed."""
    import zmq

    from brokerless.spark.sink import HEADER  # the sink's 20-byte header

    sock = zmq.Context().socket(zmq.PUSH)
    sock.connect(endpoint)
    send, pack = sock.send_multipart, HEADER.pack
    row = 0
    while True:
        send([pack(0, 0, row), str(row).rjust(size, "0").encode()])
        row += 1


def source_options(endpoint: str, directory: str, fsync: bool) -> dict[str, str]:
    return {
        "endpoints": endpoint,
        "socketType": "PULL",
        "bind": "true",
        "walPath": directory,
        "fsync": str(fsync).lower(),
    }


# -- measuring ------------------------------------------------------------------------------------


def records_written(directory: Path) -> int:
    """Records in a log directory, from its files: segments are named after their first record
    and every record of a run has the same size, so the newest segment's size says how many it
    holds (a record being written counts once it is whole)."""
    for _ in range(10):  # a segment trimmed or started meanwhile: look again
        segments = sorted(directory.glob("*.wal"))
        if not segments:
            return 0
        try:
            with open(segments[-1], "rb") as segment:
                head = segment.read(_HEADER.size)
                size = os.fstat(segment.fileno()).st_size
        except FileNotFoundError:
            continue
        first = int(segments[-1].stem)
        if len(head) < _HEADER.size:
            return first - 1
        return first - 1 + size // (_HEADER.size + _HEADER.unpack(head)[0])
    raise TrialError(f"{directory}: its segments kept changing while being counted")


class TrialError(Exception):
    pass


@dataclass
class Processes:
    """The processes of one trial: started with their stderr kept, checked, stopped."""

    tmp: Path
    procs: list[tuple[str, subprocess.Popen[bytes], Any]] = field(default_factory=list)

    def start(self, role: str, *args: str) -> subprocess.Popen[bytes]:
        err = tempfile.TemporaryFile(dir=self.tmp)  # noqa: SIM115 (closed in stop())
        with interrupts_held():  # a Ctrl-C mid-Popen would lose its process
            proc = subprocess.Popen(
                [sys.executable, str(SCRIPT), "--role", role, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,  # Ctrl-C reaches the runner, which stops them
            )
            self.procs.append((role, proc, err))
        return proc

    def check(self, *, finished_ok: subprocess.Popen[bytes] | None = None) -> None:
        """Raise TrialError if a process has ended (except ``finished_ok`` with status 0)."""
        for role, proc, err in self.procs:
            code = proc.poll()
            if code is not None and not (proc is finished_ok and code == 0):
                err.seek(0)
                tail = "\n".join(err.read().decode(errors="replace").strip().splitlines()[-15:])
                raise TrialError(f"the {role} process ended with status {code}:\n{tail}")

    def stop(self) -> None:
        for _, proc, _ in self.procs:  # SIGTERM first: the reader stops its receiver then
            if proc.poll() is None:
                proc.terminate()
        for _, proc, err in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
            err.close()


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, check: Callable[[], None]
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        check()
        if time.monotonic() > deadline:
            raise TrialError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL_S)


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


# -- the trials -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    size: int
    fsync: bool
    warmup: float
    seconds: float
    trigger: str
    rows_per_batch: int
    partitions: int


class Spark:
    """The local Spark session, started on first use (the JVM takes a while)."""

    def __init__(self, master: str) -> None:
        self.master = master
        self._session: Any = None

    @property
    def session(self) -> Any:
        if self._session is None:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            import brokerless.spark

            log(f"starting Spark ({self.master})")
            self._session = (
                brokerless.spark.session_builder(self.master, "brokerless-bench-spark-io")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            self._session.sparkContext.setLogLevel(
                "FATAL"
            )  # a stopped query logs its cancelled task
            brokerless.spark.register(self._session)
        return self._session

    def version(self) -> str:
        return str(self.session.version) if self._session is not None else "not used"

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()


@contextlib.contextmanager
def running(query: Any) -> Iterator[Callable[[], None]]:
    """Stop ``query`` at the end; yields a check that raises if it has failed."""

    def check() -> None:
        if not query.isActive:
            raise TrialError(f"the Spark query ended: {query.exception()}")

    try:
        yield check
    finally:
        query.stop()


def source_trial(variant: str, settings: Settings, spark: Spark, tmp: Path) -> float:
    """Records per second into the log: ``floor``, ``reader`` (the source alone) or ``spark``."""
    endpoint, wal = free_endpoint(), tmp / "wal"
    wal.mkdir()
    procs = Processes(tmp)
    with contextlib.ExitStack() as stack:
        stack.callback(procs.stop)
        if variant == "spark":
            query = (
                spark.session.readStream.format("brokerless")
                .options(**source_options(endpoint, str(wal), settings.fsync))
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(tmp / "checkpoint"))
                .trigger(processingTime=settings.trigger)
                .start()
            )
            query_check = stack.enter_context(running(query))
        else:
            procs.start(variant, endpoint, str(wal), str(settings.fsync).lower())
            query_check = None
        procs.start("sender", endpoint, str(settings.size))

        def check() -> None:
            procs.check()
            if query_check:
                query_check()

        wait_until(
            lambda: records_written(wal) > 0, FIRST_MESSAGE_TIMEOUT, "the first record", check
        )
        pause(settings.warmup, check)
        start, first = time.monotonic(), records_written(wal)
        pause(settings.seconds, check)
        end, last = time.monotonic(), records_written(wal)
    return (last - first) / (end - start)


def sink_trial(variant: str, settings: Settings, spark: Spark, tmp: Path) -> float:
    """Rows per second a pyzmq PULL receives: from ``pyzmq`` (a plain loop) or ``spark``."""
    endpoint = free_endpoint()
    procs = Processes(tmp)
    with contextlib.ExitStack() as stack:
        stack.callback(procs.stop)
        pull = procs.start("pull", endpoint, str(settings.warmup), str(settings.seconds))
        if variant == "spark":
            query = (
                spark.session.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", settings.rows_per_batch)
                .option("numPartitions", settings.partitions)
                .load()
                .selectExpr(
                    f"CAST(lpad(CAST(value AS STRING), {settings.size}, '0') AS BINARY) AS payload"
                )
                .writeStream.format("brokerless")
                .option("endpoints", endpoint)
                .option("socketType", "PUSH")
                .option("checkpointLocation", str(tmp / "checkpoint"))
                .start()
            )
            query_check = stack.enter_context(running(query))
        else:
            procs.start("push", endpoint, str(settings.size))
            query_check = None

        def check() -> None:
            procs.check(finished_ok=pull)
            if query_check:
                query_check()

        timeout = FIRST_MESSAGE_TIMEOUT + settings.warmup + settings.seconds + 30
        wait_until(lambda: pull.poll() == 0, timeout, "the receiver's count", check)
        assert pull.stdout is not None
        result = json.loads(pull.stdout.read())
    if result["frames"] != 2:
        raise TrialError(
            f"the receiver got {result['frames']}-frame messages, not [header, payload]"
        )
    return float(result["rate"])


def pause(seconds: float, check: Callable[[], None]) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        check()
        time.sleep(min(left, POLL_S))


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    unit: str
    trial: Callable[[str, Settings, Spark, Path], float]
    subject: str  # the variant that is brokerless's
    reference: str  # the plain pyzmq loop


CASES = (
    Case(
        "source-alone",
        "source → write-ahead log, the receiver alone (no Spark)",
        "records/s",
        source_trial,
        "reader",
        "floor",
    ),
    Case(
        "source-spark",
        "source → write-ahead log, in a Spark query (noop sink)",
        "records/s",
        source_trial,
        "spark",
        "floor",
    ),
    Case(
        "sink-spark",
        "sink (Spark, rate-micro-batch) → pyzmq PULL",
        "rows/s",
        sink_trial,
        "spark",
        "pyzmq",
    ),
)


@dataclass
class CaseResult:
    case: Case
    subject: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def ratios(self) -> list[float]:
        return [s / r for s, r in zip(self.subject, self.reference, strict=False) if r]


def run_case(case: Case, rounds: int, settings: Settings, spark: Spark) -> CaseResult:
    result = CaseResult(case)
    for rnd in range(rounds):
        order = [(case.reference, result.reference), (case.subject, result.subject)]
        for variant, figures in order if rnd % 2 == 0 else reversed(order):
            with tempfile.TemporaryDirectory(prefix="bench-spark-io-") as tmp:
                try:
                    figures.append(case.trial(variant, settings, spark, Path(tmp)))
                except TrialError as exc:
                    result.error = f"{variant}: {exc}"
                    log(f"[{case.name} {rnd + 1}/{rounds}] {variant} FAILED: {exc}")
                    return result
            log(f"[{case.name} {rnd + 1}/{rounds}] {variant:>7}: {figures[-1]:,.0f} {case.unit}")
    return result


# -- the report -----------------------------------------------------------------------------------


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def versions(spark_version: str) -> str:
    import zmq

    import brokerless

    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}); "
        f"brokerless {brokerless.BROKERLESS_VERSION}; pyzmq {zmq.__version__} "
        f"(libzmq {zmq.zmq_version()}); Spark {spark_version}"
    )


def report(results: list[CaseResult], header: list[str], rounds: int) -> list[str]:
    lines = [
        f"### Spark I/O: brokerless's source and sink against plain pyzmq loops, "
        f"{rounds} interleaved round{'s' * (rounds > 1)}",
        "",
        *header,
        "",
        "| Case | brokerless | plain pyzmq loop | brokerless ÷ pyzmq: median (min-max) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for res in results:
        cells = [
            f"{statistics.median(v):,.0f} {res.case.unit}" if v else "—"
            for v in (res.subject, res.reference)
        ]
        ratios = res.ratios
        ratio = (
            f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f})"
            if ratios
            else "—"
        )
        if res.error:
            ratio += f" (failed after {len(ratios)} of {rounds} rounds)"
        lines.append(f"| {res.case.label} | {cells[0]} | {cells[1]} | {ratio} |")
    lines.append("")
    for res in results:
        rows = ", ".join(
            f"{s:,.0f} / {r:,.0f}" for s, r in zip(res.subject, res.reference, strict=False)
        )
        lines.append(f"- {res.case.name}, brokerless / pyzmq by round: {rows or '—'}")
    failed = [res for res in results if res.error]
    if failed:
        lines += ["", "Failed (full output on stderr):", ""]
        lines += [f"- {res.case.name}: {str(res.error).splitlines()[0]}" for res in failed]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases", help=f"comma-separated, of {', '.join(c.name for c in CASES)} (default: all)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds per case (default 3)")
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="measured window (default 10 s)"
    )
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="from the first message to the window (3 s)"
    )
    parser.add_argument(
        "--size", type=int, default=100, help="payload bytes per message (default 100)"
    )
    parser.add_argument(
        "--fsync",
        choices=["true", "false"],
        default="true",
        help="the log's fsync policy, both sides (default true)",
    )
    parser.add_argument(
        "--trigger", default="1 second", help="the source query's processing-time trigger"
    )
    parser.add_argument(
        "--rows-per-batch", type=int, default=100_000, help="sink: rows per micro-batch"
    )
    parser.add_argument(
        "--partitions", type=int, default=1, help="sink: partitions (write tasks) per micro-batch"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N CPU-bound processes beside the benchmark (see compare.py)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    args, role_args = parser.parse_known_args(argv)
    if args.role:
        return run_role(args.role, role_args)
    if role_args:
        parser.error(f"unrecognized arguments: {' '.join(role_args)}")
    names = [
        n.strip() for n in (args.cases or ",".join(c.name for c in CASES)).split(",") if n.strip()
    ]
    unknown = [n for n in names if n not in {c.name for c in CASES}]
    if unknown:
        parser.error(
            f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(c.name for c in CASES)}"
        )
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0 or args.size < 1 or args.busy < 0:
        parser.error(
            "--rounds, --seconds and --size must be positive, --warmup and --busy 0 or more"
        )
    cases = [c for c in CASES if c.name in names]
    settings = Settings(
        size=args.size,
        fsync=args.fsync == "true",
        warmup=args.warmup,
        seconds=args.seconds,
        trigger=args.trigger,
        rows_per_batch=args.rows_per_batch,
        partitions=args.partitions,
    )
    condition = Condition(args.busy, load_average())
    spark = Spark(args.master)
    results = []
    try:
        with busy(args.busy):
            for number, case in enumerate(cases, 1):
                log(f"case {number}/{len(cases)}: {case.name} ({case.label})")
                results.append(run_case(case, args.rounds, settings, spark))
            condition.load_at_end = load_average()
    except BusyProcessDied as exc:
        log(f"error: {exc}")
        return 2
    finally:
        spark_version = spark.version()
        spark.stop()
    header = [
        f"- Command: `{shlex.join(sys.orig_argv)}`",
        f"- Date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- {versions(spark_version)}",
        f"- Machine: {cpu_model()}, {platform.platform()}",
        *condition.lines(),
        f"- Messages of {settings.size} B over tcp; log fsync {args.fsync}; {settings.warmup:g} s "
        f"from the first message, then {settings.seconds:g} s counted; Spark {args.master}, "
        f"source trigger {settings.trigger}, sink {settings.rows_per_batch:,} rows per "
        f"micro-batch in {settings.partitions} partition{'s' * (settings.partitions > 1)}",
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "command": sys.orig_argv,
                    "condition": condition.as_dict(),
                    "settings": settings.__dict__,
                    "cases": [
                        {
                            "case": r.case.name,
                            "unit": r.case.unit,
                            "brokerless": r.subject,
                            "pyzmq": r.reference,
                            "ratios": r.ratios,
                            "error": r.error,
                        }
                        for r in results
                    ],
                }
            ),
            flush=True,
        )
    else:
        print("\n".join(report(results, header, args.rounds)), flush=True)
    return 1 if any(r.error for r in results) else 0


def run_role(role: str, args: list[str]) -> int:
    roles: dict[str, Callable[[list[str]], None]] = {
        "sender": lambda a: role_sender(a[0], int(a[1])),
        "floor": lambda a: role_floor(a[0], a[1], a[2] == "true"),
        "reader": lambda a: role_reader(a[0], a[1], a[2] == "true"),
        "pull": lambda a: role_pull(a[0], float(a[1]), float(a[2])),
        "push": lambda a: role_push(a[0], int(a[1])),
    }
    roles[role](args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # each trial's processes were stopped on the way out
        log("interrupted")
        sys.exit(130)
