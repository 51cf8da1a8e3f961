"""The stream-message fuzz target (fuzz/stream_messages.py): the corpus holds the target's
``seeds()``, and a short property run finds nothing either (test_fuzz_corpus.py replays the
corpus)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerless.stream.protocol import task_frame

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
CORPUS = FUZZ / "corpus" / "stream_messages"


def _load():
    spec = importlib.util.spec_from_file_location("stream_messages", FUZZ / "stream_messages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


target = _load()


def test_the_corpus_holds_the_targets_seeds():
    corpus = {p.name: p.read_bytes() for p in CORPUS.iterdir()}
    for data in target.seeds():
        assert corpus.get(hashlib.sha1(data).hexdigest()) == data


def test_the_seeds_are_accepted_or_rejected_as_named():
    for name, data in target.named_seeds().items():
        accepted = target.WORKER.inbound.read(target.frames_of(data))
        assert bool(accepted.bad) == name.startswith("bad-"), (name, accepted)


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.sampled_from(["default", "pairs"]),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.integers(0, 9), inner, max_size=3)
    ),
    max_leaves=12,
)
messages = st.builds(
    lambda kind, rest: [kind, *rest], st.integers(0, 7), st.lists(values, max_size=4)
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 9), messages | values | st.binary(max_size=16)), max_size=4)
)
def test_random_msgpack_messages_break_nothing(pairs):
    frames = []
    for task, message in pairs:
        payload = message if type(message) is bytes else msgpack.packb(message, use_bin_type=True)
        frames += [task_frame(task), payload]
    target.test_one_input(target.data_of(frames))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_break_nothing(data):
    target.test_one_input(data)
