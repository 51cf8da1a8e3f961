"""Live input for the exactly-once recovery tests: a pyzmq PUSH sends numbered sentences for a
while, then ``END``; a brokerless PULL in the test's process appends them to a write-ahead log
(``Ingest``); a checkpointed word count reads the log (``EndingWALSpout``) in two workers.
``test_stream_state_recovery.py`` runs it in every mode, ``test_spark_cluster.py`` on a
cluster that loses an executor.  ``BROKERLESS_RECOVERY_SECONDS`` says how long the sender
sends (``make test-recovery``: a minute)."""

from __future__ import annotations

import collections
import os
import threading
import time
from functools import partial

import zmq as pyzmq

import brokerless as zmq
from brokerless.spark.wal import WriteAheadLog
from brokerless.stream import Config, Topology, fields, read_state
from brokerless.stream.examples import SENTENCES
from brokerless.stream.run import TopologyRun

from .stream_topologies import EndingWALSpout, StatefulCount, WordSplit, wait_for

SECONDS = float(os.environ.get("BROKERLESS_RECOVERY_SECONDS", "3"))
RATE = 400  # sentences per second


class Ingest:
    """PULL -> write-ahead log, in a thread: the receiver the topology's spout reads behind."""

    def __init__(self, directory: str) -> None:
        self.wal = WriteAheadLog(directory, fsync=False)
        self.context = zmq.Context()
        self.pull = self.context.socket(zmq.PULL)
        self.pull.bind("tcp://127.0.0.1:0")
        self.endpoint = self.pull.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ingest", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.ended.is_set():
            if not self.pull.poll(50):
                continue
            while True:
                try:
                    frames = self.pull.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.wal.append(frames, int(time.time() * 1e6))
                if frames[-1] == b"END":
                    self.ended.set()
            self.wal.flush()

    def close(self) -> None:
        self.ended.set()
        self.thread.join(10)
        self.pull.close(linger=0)
        self.context.term()
        self.wal.close()


def send_sentences(endpoint: str, seconds: float, sent: list[str]) -> None:
    """Send numbered sentences from a pyzmq PUSH for ``seconds``, then END."""
    context = pyzmq.Context()
    push = context.socket(pyzmq.PUSH)
    push.connect(endpoint)
    pace = threading.Event()
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        for _ in range(RATE // 50):
            sentence = f"{i} {SENTENCES[i % len(SENTENCES)]}"
            push.send(sentence.encode())
            sent.append(sentence)
            i += 1
        pace.wait(1 / 50)
    push.send(b"END")
    sent.append("END")
    push.close(linger=-1)
    context.term()


def live_word_count(wal: str, checkpoints: str) -> Topology:
    """The word count over the log, in two workers, checkpointed every 0.25 s."""
    config = Config(num_workers=2, checkpoint_interval_secs=0.25, checkpoint_dir=checkpoints)
    return (
        Topology("live-word-count", config)
        .spout("sentences", partial(EndingWALSpout, wal))
        .bolt("split", WordSplit, parallelism=2, inputs=["sentences"])
        .bolt("count", StatefulCount, parallelism=2, tasks=4, inputs={"split": fields("word")})
    )


def counted(checkpoints: str) -> collections.Counter[str]:
    """The count bolt's state in the last complete checkpoint, all tasks together."""
    counts: collections.Counter[str] = collections.Counter()
    for state in read_state(checkpoints, "count").values():
        counts.update(state)
    return counts


def words(sent: list[str]) -> collections.Counter[str]:
    """What an exact word count of ``sent`` holds."""
    return collections.Counter(w for s in sent for w in s.split())


class LiveInput:
    """A word count's live input (a context manager): the ingest thread, its log in
    ``directory``/wal, the checkpoints' location, and the sender, started by
    ``send_until_half_way``."""

    def __init__(self, directory: str) -> None:
        self.wal = f"{directory}/wal"
        self.checkpoints = f"{directory}/checkpoints"
        self.ingest = Ingest(self.wal)
        self.sent: list[str] = []
        self.sender = threading.Thread(
            target=send_sentences, args=(self.ingest.endpoint, SECONDS, self.sent)
        )

    def topology(self) -> Topology:
        return live_word_count(self.wal, self.checkpoints)

    def send_until_half_way(self, run: TopologyRun, timeout: float) -> None:
        """Start the sender; return once it has sent for half its time and ``run`` has
        completed two checkpoints (the moment to lose a worker)."""
        self.sender.start()
        started = time.monotonic()
        wait_for(
            lambda: (
                run.checkpoint_statistics().completed >= 2
                and time.monotonic() - started > SECONDS / 2
            ),
            timeout=timeout + SECONDS,
            what="two checkpoints, half-way",
        )

    def finish(self, run: TopologyRun, timeout: float) -> None:
        """Wait until the sender has sent END and the log holds it, then until ``run`` has
        processed all of it (up to ``timeout`` seconds); take a checkpoint of it all."""
        self.sender.join(SECONDS + 30)
        assert not self.sender.is_alive(), "the sender is still sending"
        assert self.ingest.ended.wait(30), "END never reached the log"
        run.wait_until_done(timeout)
        run.checkpoint()

    def check(self) -> None:
        """The log holds everything sent, and the last checkpoint counts it exactly."""
        assert self.ingest.wal.durable_seq == len(self.sent)
        assert counted(self.checkpoints) == words(self.sent)

    def __enter__(self) -> LiveInput:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sender.ident is not None:
            self.sender.join(SECONDS + 30)
        self.ingest.close()
