"""README's "pyzmq compatibility" section is generated from the yardstick's reports
(``tools/pyzmq_suite.py --readme``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _reports(tmp_path: Path) -> Path:
    def row(name, pyzmq, mine):
        return {"file": name, "tests": pyzmq + 1, "pyzmq_passes": pyzmq, "brokerless_passes": mine}

    suite = {
        "pyzmq_version": "27.3.0",
        "brokerless_commit": "abc1234",
        "date": "2026-11-25 17:00",
        "rows": [row("test_a.py", 10, 9), row("test_draft.py", 0, 0), row("test_b.py", 10, 10)],
    }
    passed = {"passed": True, "reason": ""}
    examples = {
        "results": {
            "a/ok.py": {"pyzmq": passed, "brokerless": passed},
            "a/lost.py": {"pyzmq": passed, "brokerless": {"passed": False, "reason": "why"}},
            "a/old.py": {"pyzmq": {"passed": False, "reason": "x"}, "brokerless": passed},
        },
        "not_driven": {"c/x.py": ["cython", "needs Cython"]},
    }
    (tmp_path / "pyzmq_suite.json").write_text(json.dumps(suite))
    (tmp_path / "pyzmq_examples.json").write_text(json.dumps(examples))
    return tmp_path


def test_readme_section_is_printed_from_the_reports(tmp_path):
    tool = subprocess.run(
        [sys.executable, str(TOOLS / "pyzmq_suite.py"), "--readme", "--out", _reports(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = tool.stdout
    assert text.startswith("## pyzmq compatibility\n")
    assert "brokerless passes 19 of the 20 tests pyzmq passes here (95%)" in text
    assert "| test_a.py | 10 | 9 |" in text and "| **total** | **20** | **19** |" in text
    assert "test_draft.py" not in text  # pyzmq passes nothing there
    assert "runs **1 of the 2** driven examples that run on pyzmq (not: `a/lost.py`: why)" in text
    assert "1 fail on pyzmq itself, 1 are not programs" in text
    assert "| `get_includes()`, `get_library_dirs()` |" in text
