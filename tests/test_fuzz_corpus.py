"""Every fuzz target's saved corpus replays cleanly (issue 11, point 7).

The targets are found as ``make fuzz`` finds them (``fuzz/*.py`` but run.py and ``_*.py``), so a
new target and its ``fuzz/corpus/<name>/`` are replayed here without being listed.  A corpus
input that fails is a bug the fuzzer once found (or a regression of one it reached).
"""

from __future__ import annotations

import pytest
from fuzz import run

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("name", run.targets())
def test_the_corpus_of_every_fuzz_target_replays_cleanly(name):
    assert run.replay(name) > 0, f"fuzz/corpus/{name}/ is empty: run python -m fuzz.run --seed"


def test_the_codec_corpus_reaches_traffic_over_every_mechanism():
    """The codec target's corpus holds, for NULL, PLAIN, CURVE and CURVE asking ZAP, in both
    roles, inputs whose handshake completes and whose messages are delivered: what the fuzzer
    mutates reaches every mechanism's handshake and traffic."""
    from fuzz import zmtp_codec as target

    reached = set()
    for path in run.corpus_files("zmtp_codec"):
        data = path.read_bytes()
        if len(data) < 2:
            continue
        kind, as_server = data[1] & target.CURVE_ZAP, bool(data[0] & target.AS_SERVER)
        socket_type = target.SOCKET_TYPES[(data[0] & 0x0F) % len(target.SOCKET_TYPES)]
        outcome = target._Outcome(socket_type, as_server, -1, kind)
        outcome.feed([data[2:]])
        if outcome.messages():
            reached.add((kind, as_server))
    assert reached == {(kind, role) for kind in target.MECHANISMS for role in (False, True)}
