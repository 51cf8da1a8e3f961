"""Jupyter on brokerless: ipykernel and jupyter_client, each on brokerless or on pyzmq.

Each run starts one real kernel from a kernelspec -- ``python3`` (ipykernel on pyzmq) or
``python3-brokerless`` (installed by ``python -m brokerless.compat.kernelspec``) -- and drives it
from a client process (tests/jupyter_driver.py, run plainly, through the ``zmq`` alias's
launcher, or after ``brokerless.compat.install()``) through jupyter_client's KernelManager,
BlockingKernelClient and AsyncKernelClient: execute, output on iopub, kernel_info, an
``input()`` round trip on stdin, SIGINT into a running cell, the heartbeat, the debugger's
control request, a restart and a clean shutdown. The tests below read what each check saw.
Two more runs do the same with jupyter_client's CurveZMQ transport encryption between the two
implementations. Against pyzmq (BROKERLESS_TEST_AGAINST=pyzmq) the one run is pyzmq on both
sides: the reference the expectations are checked on.

Everything runs in a private Jupyter home (kernelspecs, connection files, IPython's profile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import AGAINST_PYZMQ

DRIVER = Path(__file__).with_name("jupyter_driver.py")
#: How the driver is started, so that its ``zmq`` is pyzmq or brokerless -- through the launcher,
#: or by ``brokerless.compat.install()`` before anything imports ``zmq``.
CLIENTS = {
    "pyzmq": [sys.executable, str(DRIVER)],
    "brokerless": [sys.executable, "-m", "brokerless.compat.as_zmq", "--no-inherit", str(DRIVER)],
    "brokerless by install()": [
        sys.executable,
        "-c",
        "import runpy, sys\n"
        "from brokerless.compat import install\n"
        "install()\n"
        "sys.argv = sys.argv[1:]\n"
        "sys.path.insert(0, sys.argv[0].rpartition('/')[0])\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')",
        str(DRIVER),
    ],
}
KERNELS = {"pyzmq": "python3", "brokerless": "python3-brokerless"}
CURVE = {"transport_encryption": "required"}

#: run id -> (kernel's zmq, client, KernelManager options)
RUNS: dict[str, tuple[str, str, dict[str, Any]]] = (
    {"pyzmq-kernel-pyzmq-client": ("pyzmq", "pyzmq", {})}
    if AGAINST_PYZMQ
    else {
        "brokerless-kernel-pyzmq-client": ("brokerless", "pyzmq", {}),
        "pyzmq-kernel-brokerless-client": ("pyzmq", "brokerless", {}),
        "brokerless-kernel-brokerless-client": ("brokerless", "brokerless by install()", {}),
        "curve-brokerless-kernel-pyzmq-client": ("brokerless", "pyzmq", CURVE),
        "curve-pyzmq-kernel-brokerless-client": ("pyzmq", "brokerless", CURVE),
    }
)

#: A whole run (kernel start, every check, restart, shutdown) takes a few seconds; this bounds
#: it on a loaded machine. The first test of each run pays for it.
RUN_TIMEOUT = 150
pytestmark = pytest.mark.timeout(RUN_TIMEOUT + 30)


@pytest.fixture(scope="module")
def jupyter_env(tmp_path_factory) -> dict[str, str]:
    """The environment of a private Jupyter home holding the brokerless kernelspec."""
    home = tmp_path_factory.mktemp("jupyter")
    env = {
        **os.environ,
        "JUPYTER_PATH": str(home / "share" / "jupyter"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    subprocess.run(
        [sys.executable, "-m", "brokerless.compat.kernelspec", "--prefix", str(home)],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return env


#: Each run starts a kernel (~8 s): the default suite runs one pairing each way, one of them
#: with CURVE; `make test-slow` the others.
SLOW_RUNS = {
    "pyzmq-kernel-brokerless-client",
    "brokerless-kernel-brokerless-client",
    "curve-brokerless-kernel-pyzmq-client",
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(run, marks=pytest.mark.slow) if run in SLOW_RUNS else run for run in RUNS
    ],
)
def seen(request, jupyter_env, tmp_path_factory) -> dict[str, Any]:
    """What each check of one run saw (see tests/jupyter_driver.py)."""
    kernel, client, options = RUNS[request.param]
    results = tmp_path_factory.mktemp(request.param) / "results.json"
    driven = subprocess.run(
        [*CLIENTS[client], KERNELS[kernel], str(results), json.dumps(options)],
        env=jupyter_env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert driven.returncode == 0 and results.exists(), driven.stderr
    outcome = json.loads(results.read_text())
    assert outcome["client zmq"]["seen"] == ("zmq" if client == "pyzmq" else "brokerless")
    return {"run": request.param, "checks": outcome}


def check(seen: dict[str, Any], name: str) -> Any:
    """What check ``name`` saw; fails with the check's traceback when it raised, or with why
    the kernel never became ready (and its log) when the check could not run."""
    checks = seen["checks"]
    outcome = checks.get(name) or checks["ready"]
    if not outcome["ok"]:
        log = checks["shutdown"].get("seen", {}).get("kernel log", "")
        pytest.fail(
            f"{name} in run {seen['run']}: {outcome['error']}\nkernel log:\n{log}", pytrace=False
        )
    return outcome["seen"]


def test_the_kernel_runs_on_the_chosen_zmq(seen):
    kernel = RUNS[seen["run"]][0]
    check(seen, "ready")
    assert check(seen, "kernel zmq") == {
        "status": "ok",
        "outputs": [["stream", "stdout", "brokerless" if kernel == "brokerless" else "zmq"]],
    }


def test_kernel_info(seen):
    info = check(seen, "kernel_info")
    assert info["status"] == "ok"
    assert info["implementation"] == "ipython"
    assert info["language_info"]["name"] == "python"


def test_execute_gives_the_result(seen):
    assert check(seen, "execute") == {"status": "ok", "outputs": [["result", "42"]]}


def test_stdout_and_stderr_stream_on_iopub(seen):
    assert check(seen, "stream") == {
        "status": "ok",
        "outputs": [["stream", "stdout", "out\n"], ["stream", "stderr", "err\n"]],
    }


def test_input_round_trips_on_the_stdin_channel(seen):
    assert check(seen, "input") == {
        "status": "ok",
        "outputs": [["stream", "stdout", "got brokerless to name? \n"]],
    }


def test_the_heartbeat_answers(seen):
    assert check(seen, "heartbeat") == ["ping", True]


def test_interrupt_raises_keyboard_interrupt_in_the_cell_and_the_kernel_goes_on(seen):
    assert check(seen, "interrupt") == {
        "heartbeat while busy": "ping",
        "reply to the cell": True,
        "status": "error",
        "ename": "KeyboardInterrupt",
        "next cell": {"status": "ok", "outputs": [["result", "2"]]},
    }


def test_the_async_client_executes_with_input(seen):
    assert check(seen, "async client") == {
        "kernel_info": "ok",
        "status": "ok",
        "outputs": [["stream", "stdout", "async who? \n"]],
    }


def test_the_debugger_answers_on_the_control_channel(seen):
    assert check(seen, "debugger") is True


def test_a_restarted_kernel_is_found_again_by_the_client(seen):
    assert check(seen, "restart") == {
        "new process": True,
        "cell": {"status": "ok", "outputs": [["stream", "stdout", "restarted\n"]]},
    }


def test_shutdown_is_prompt_and_leaves_nothing(seen):
    done = check(seen, "shutdown")
    assert done["returncode"] == 0, done["kernel log"]
    assert done["seconds"] < done["asked for at most"]
    assert done["kernel gone"]
    assert done["processes left"] == []
    assert done["threads left"] == []
    assert "Traceback" not in done["kernel log"], done["kernel log"]


def test_the_kernelspec_starts_ipykernel_through_the_alias(jupyter_env):
    from ipykernel.kernelspec import get_kernel_dict

    spec = Path(jupyter_env["JUPYTER_PATH"], "kernels", "python3-brokerless", "kernel.json")
    kernel = json.loads(spec.read_text())
    assert kernel["argv"][0] == sys.executable
    assert kernel["argv"][-7:] == [
        *("-m", "brokerless.compat.as_zmq", "--no-inherit"),
        *("-m", "ipykernel_launcher", "-f", "{connection_file}"),
    ]
    assert kernel["display_name"] == "Python 3 (brokerless)"
    # ipykernel's own metadata (the debugger, CurveZMQ; its shape varies with the version:
    # 7.3 says "curve", 7.4 ["curve"])
    assert kernel["metadata"] == get_kernel_dict()["metadata"]
    assert "curve" in kernel["metadata"]["supported_encryption"]
