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
