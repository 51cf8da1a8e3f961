"""The ``zmq`` → brokerless alias (``brokerless.compat``) and its launcher ``as_zmq``.

Each case runs in a fresh interpreter: this test process has imported the real pyzmq (the
interop tests use it), and the alias refuses to share a process with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from brokerless import curve_public

LAUNCHER = [sys.executable, "-m", "brokerless.compat.as_zmq"]


def run(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None):
    return subprocess.run(
        args, capture_output=True, text=True, timeout=60, cwd=cwd, env=env, check=False
    )


def run_code(code: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-c", textwrap.dedent(code)])


def test_zmq_and_its_submodules_are_brokerless_module_objects():
    result = run_code("""
        from brokerless.compat import install
        install()
        import zmq, zmq.constants, zmq.error
        from zmq.error import ZMQError
        import brokerless, brokerless.constants, brokerless.error
        assert zmq is brokerless
        assert zmq.Socket is brokerless.Socket and zmq.Context is brokerless.Context
        assert zmq.constants is brokerless.constants
        assert ZMQError is brokerless.error.ZMQError
        # the modules keep describing themselves under their own names
        assert brokerless.__spec__.name == "brokerless", brokerless.__spec__
        assert zmq.constants.__spec__.name == "brokerless.constants"
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_pyzmq_style_code_exchanges_messages_through_the_alias():
    result = run_code("""
        from brokerless.compat import install
        install()
        import zmq
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push = ctx.socket(zmq.PUSH)
        push.connect(f"tcp://127.0.0.1:{port}")
        push.send_multipart([b"a", b"b"])
        pull.rcvtimeo = 5000
        print(pull.recv_multipart())
        ctx.destroy(linger=0)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[b'a', b'b']"


def test_a_missing_submodule_raises_module_not_found_naming_the_zmq_name():
    result = run_code("""
        from brokerless.compat import install
        install()
        import zmq
        for name in ("zmq.no_such_module", "zmq.constants.no_such_module"):
            try:
                __import__(name)
            except ModuleNotFoundError as e:
                assert e.name == name, (e.name, name)
                assert repr(name) in str(e), str(e)
            else:
                raise AssertionError(f"{name} imported")
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_install_refuses_when_the_real_pyzmq_is_already_imported():
    result = run_code("""
        import zmq
        from brokerless.compat import install, installed
        try:
            install()
        except RuntimeError as e:
            print(e)
        assert not installed()
        assert zmq.__name__ == "zmq"
    """)
    assert result.returncode == 0, result.stderr
    assert "the real pyzmq is already imported" in result.stdout
    assert "zmq" in result.stdout and "site-packages" in result.stdout


def test_uninstall_gives_the_name_back():
    result = run_code("""
        from brokerless.compat import install, installed, uninstall
        install()
        install()  # twice is harmless
        import zmq
        assert zmq.__name__ == "brokerless"
        uninstall()
        assert not installed()
        import zmq
        assert zmq.__name__ == "zmq", zmq
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


SCRIPT = """
import subprocess, sys
import zmq
print(__name__, zmq.__name__, sys.argv[1:], sys.path[0])
child = subprocess.run(
    [sys.executable, "-c", "import zmq; print(zmq.__name__)"],
    capture_output=True, text=True, timeout=60,
)
print("child", child.stdout.strip() or child.stderr)
sys.exit(int(sys.argv[-1]))
"""


def test_launcher_runs_a_script_with_its_arguments_and_exit_status(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    result = run([*LAUNCHER, str(script), "x", "3"])
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"__main__ brokerless ['x', '3'] {tmp_path}"
    assert lines[1] == "child brokerless"


def test_launcher_no_inherit_leaves_child_processes_on_pyzmq(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    result = run([*LAUNCHER, "--no-inherit", str(script), "0"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "child zmq"


def test_launcher_runs_a_module_and_code(tmp_path):
    (tmp_path / "prog.py").write_text(SCRIPT)
    result = run([*LAUNCHER, "-m", "prog", "y", "0"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("__main__ brokerless ['y', '0']")

    result = run([*LAUNCHER, "-c", "import sys, zmq; print(__name__, zmq.__name__, sys.argv)", "z"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "__main__ brokerless ['-c', 'z']"


def test_python_m_runs_a_brokerless_module_by_its_zmq_name():
    """``python -m zmq.curve_keygen``: runpy takes the code from the alias's loader, through the
    launcher and in a child that inherits the alias."""
    child = (
        "import subprocess, sys; "
        "sys.exit(subprocess.run([sys.executable, '-m', 'zmq.curve_keygen', '--json']).returncode)"
    )
    for args in (["-m", "zmq.curve_keygen", "--json"], ["-c", child]):
        result = run([*LAUNCHER, *args])
        assert result.returncode == 0, result.stderr
        keys = json.loads(result.stdout)
        assert set(keys) == {"public", "secret"}
        assert curve_public(keys["secret"]).decode() == keys["public"]


def test_children_still_run_the_sitecustomize_the_alias_shadows(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.SHADOWED_RAN = True\n")
    script = tmp_path / "prog.py"
    script.write_text(
        "import subprocess, sys\n"
        "code = 'import builtins, zmq; print(zmq.__name__, builtins.SHADOWED_RAN)'\n"
        "print(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,"
        " timeout=60).stdout.strip())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = run([*LAUNCHER, str(script)], env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "brokerless True"


def test_launcher_without_a_target_prints_usage_and_fails():
    for args in ([], ["-m"], ["-c"]):
        result = run([*LAUNCHER, *args])
        assert result.returncode == 2
        assert "usage: python -m brokerless.compat.as_zmq" in result.stderr
