"""A topology whose components are defined in the script the user runs works in worker
processes, as multiprocessing's spawn start method has it: the script (``python script.py``)
or module (``python -m module``) is imported again in each worker as ``__mp_main__``; a script
without the ``__main__`` guard, or components defined in ``python -c``, get a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .processes import child_pids

pytestmark = pytest.mark.timeout(150)

TIMEOUT = 120  # seconds for one driver process (it starts two workers)

COMPONENTS = textwrap.dedent("""
    import json
    from functools import partial

    from brokerless.stream import Bolt, Topology, complete_topology, fields, shuffle
    from brokerless.stream.examples import SentenceSpout, final_counts

    class Split(Bolt):
        outputs = ["word"]
        def process(self, tup):
            for word in tup["sentence"].split():
                self.emit([word])

    class Count(Bolt):
        outputs = ["word", "count"]
        def prepare(self, conf, context):
            self.counts = {}
        def process(self, tup):
            n = self.counts[tup["word"]] = self.counts.get(tup["word"], 0) + 1
            self.emit([tup["word"], n])

    def main():
        topo = (Topology("script-count")
                .spout("sentences", partial(SentenceSpout, ["a b a", "b c a", "c a"]),
                       parallelism=2)
                .bolt("split", Split, parallelism=2, inputs={"sentences": shuffle()})
                .bolt("count", Count, parallelism=2, tasks=4, inputs={"split": fields("word")}))
        result = complete_topology(topo, mode="multiprocess", workers=2, timeout=60)
        print(json.dumps({"errors": [str(e) for e in result.errors],
                          "counts": final_counts(result.emitted("count"))}))
""")
GUARDED = COMPONENTS + '\nif __name__ == "__main__":\n    main()\n'
EXPECTED = {"a": 4, "b": 2, "c": 2}


@pytest.fixture(autouse=True)
def no_processes_left_behind():
    before = child_pids()
    yield
    assert child_pids() - before == set()


def run(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )


def counted(out: subprocess.CompletedProcess[str]) -> dict[str, int]:
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["errors"] == []
    return report["counts"]


def test_components_defined_in_the_script_run_in_worker_processes(tmp_path):
    (tmp_path / "wordcount.py").write_text(GUARDED)
    assert counted(run(["wordcount.py"], tmp_path)) == EXPECTED


def test_components_defined_in_a_module_run_with_dash_m(tmp_path):
    (tmp_path / "wordcount_module.py").write_text(GUARDED)
    assert counted(run(["-m", "wordcount_module"], tmp_path)) == EXPECTED


def test_a_script_without_the_main_guard_gets_a_clear_error(tmp_path):
    (tmp_path / "unguarded.py").write_text(COMPONENTS + "\nmain()\n")
    out = run(["unguarded.py"], tmp_path)
    assert out.returncode != 0
    assert "WorkerProcessError" in out.stderr
    assert 'if __name__ == "__main__":' in out.stderr
    assert "importing the driver's main module" in out.stderr


def test_components_defined_in_dash_c_are_refused_saying_they_must_be_importable(tmp_path):
    out = run(["-c", COMPONENTS + "\nmain()\n"], tmp_path)
    assert out.returncode != 0
    assert "TopologyError" in out.stderr
    assert "Count, Split defined in __main__" in out.stderr
    assert "put the components in a module the workers can import" in out.stderr


def test_a_script_fed_on_stdin_runs_components_from_a_module(tmp_path):
    """``python - <<EOF``: there is no script file to import again, so it is taken as
    ``python -c`` is (the worker imported '<stdin>' as a path and failed)."""
    (tmp_path / "wordcount_module.py").write_text(GUARDED)
    out = run(["-"], tmp_path, stdin="import wordcount_module\nwordcount_module.main()\n")
    assert counted(out) == EXPECTED


def test_components_defined_in_a_script_fed_on_stdin_are_refused_clearly(tmp_path):
    out = run(["-"], tmp_path, stdin=COMPONENTS + "\nmain()\n")
    assert out.returncode != 0
    assert "TopologyError" in out.stderr
    assert "Count, Split defined in __main__" in out.stderr
    assert "a script read from stdin" in out.stderr
