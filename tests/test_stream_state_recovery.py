"""Exactly-once state on a live stream with a lost worker: a pyzmq PUSH sends numbered
sentences; a brokerless PULL in this process appends them to a write-ahead log; a checkpointed
word count reads the log (WALSpout) in two workers, one of which is lost mid-stream (SIGKILL in
multi-process mode, ``kill_worker`` in local mode).  The counts in the last checkpoint equal a
``collections.Counter`` of what was sent.

The default suite sends for a few seconds; ``make test-recovery`` for a minute
(``BROKERLESS_RECOVERY_SECONDS``)."""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from functools import partial

import pytest
import zmq as pyzmq

import brokerless as zmq
from brokerless.spark.wal import WriteAheadLog
from brokerless.stream import Config, Topology, fields, read_state, run_local, run_multiprocess
from brokerless.stream.examples import SENTENCES

from .processes import child_pids
from .stream_topologies import EndingWALSpout, StatefulCount, WordSplit, wait_for

SECONDS = float(os.environ.get("BROKERLESS_RECOVERY_SECONDS", "3"))
RATE = 400  # sentences per second
pytestmark = pytest.mark.timeout(120 + 3 * SECONDS)


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
    config = Config(num_workers=2, checkpoint_interval_secs=0.25, checkpoint_dir=checkpoints)
    return (
        Topology("live-word-count", config)
        .spout("sentences", partial(EndingWALSpout, wal))
        .bolt("split", WordSplit, parallelism=2, inputs=["sentences"])
        .bolt("count", StatefulCount, parallelism=2, tasks=4, inputs={"split": fields("word")})
    )


@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_live_word_count_that_loses_a_worker_counts_exactly_what_was_sent(tmp_path, mode):
    before = child_pids()
    ingest = Ingest(str(tmp_path / "wal"))
    checkpoints = str(tmp_path / "checkpoints")
    topology = live_word_count(str(tmp_path / "wal"), checkpoints)
    sent: list[str] = []
    sender = threading.Thread(target=send_sentences, args=(ingest.endpoint, SECONDS, sent))
    try:
        run = run_local(topology) if mode == "local" else run_multiprocess(topology)
        with run:
            sender.start()
            started = time.monotonic()
            wait_for(
                lambda: (
                    run.checkpoint_statistics().completed >= 2
                    and time.monotonic() - started > SECONDS / 2
                ),
                timeout=30 + SECONDS,
                what="two checkpoints, half-way",
            )
            if mode == "local":
                run.kill_worker(1)
            else:
                os.kill(run.pids[1], signal.SIGKILL)
            sender.join(SECONDS + 30)
            assert ingest.ended.wait(30)
            run.wait_until_done(60 + SECONDS)
            run.checkpoint()
            assert len(run.restarts) == 1
            assert run.checkpoint_statistics().restored_from >= 2  # not from the start
            counts: collections.Counter = collections.Counter()
            for state in read_state(checkpoints, "count").values():
                counts.update(state)
    finally:
        sender.join(SECONDS + 30)
        ingest.close()
    assert ingest.wal.durable_seq == len(sent)
    assert counts == collections.Counter(w for s in sent for w in s.split())
    assert child_pids() - before == set()
