"""Drives one Jupyter kernel through jupyter_client and records what each check saw.

    python tests/jupyter_driver.py KERNEL_NAME RESULTS_JSON [KERNEL_MANAGER_OPTIONS_JSON]

The client is this process's ``zmq``: pyzmq, or brokerless when the driver is started through
``python -m brokerless.compat.as_zmq --no-inherit``. The kernel is the kernelspec KERNEL_NAME:
``python3`` (ipykernel on pyzmq) or ``python3-brokerless`` (ipykernel on brokerless, installed by
``python -m brokerless.compat.kernelspec``). Each check below records
``{"ok": true, "seen": ...}`` or ``{"ok": false, "error": traceback}`` in RESULTS_JSON, which
tests/test_jupyter.py reads: one kernel serves every check, and a failing check does not hide
the others. Every wait is bounded (jupyter_client's timeouts, a poll timeout).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq
from jupyter_client import KernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.blocking import BlockingKernelClient

from processes import descendants, gone

#: Bound on every single wait for the kernel (a reply, an output, a heartbeat echo).
TIMEOUT = 20.0

Message = dict[str, Any]


def outputs(messages: list[Message]) -> list[list[str]]:
    """What a cell showed: stream texts by name, results and errors, in order."""
    shown = []
    for msg in messages:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            shown.append(["stream", content["name"], content["text"]])
        elif kind == "execute_result":
            shown.append(["result", content["data"]["text/plain"]])
        elif kind == "error":
            shown.append(["error", content["ename"]])
    return shown


def run(kc: BlockingKernelClient, code: str, **kwargs: Any) -> dict[str, Any]:
    """Execute ``code``: the reply's status and what the cell showed on iopub."""
    shown: list[Message] = []
    reply = kc.execute_interactive(code, timeout=TIMEOUT, output_hook=shown.append, **kwargs)
    return {"status": reply["content"]["status"], "outputs": outputs(shown)}


def answer_input(kc: BlockingKernelClient) -> Callable[[Message], None]:
    """A stdin hook that answers an ``input()`` with a text naming its prompt."""
    return lambda request: kc.input("brokerless to " + request["content"]["prompt"])


def ping_heartbeat(km: KernelManager) -> str:
    """One ping on the kernel's heartbeat port, from a socket of our own: the echo."""
    hb = km.connect_hb()
    try:
        hb.send(b"ping")
        if not hb.poll(int(TIMEOUT * 1000)):
            return "no echo"
        return hb.recv().decode()
    finally:
        hb.close(linger=0)


def iopub_until(kc: BlockingKernelClient, parent: str, kind: str, **content: Any) -> None:
    """Wait for the first iopub message of ``kind`` answering request ``parent`` (with
    ``content``'s items in its content)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.0, deadline - time.monotonic()))
        if (
            msg["parent_header"].get("msg_id") == parent
            and msg["msg_type"] == kind
            and content.items() <= msg["content"].items()
        ):
            return


def interrupt(km: KernelManager, kc: BlockingKernelClient) -> dict[str, Any]:
    """Interrupt a sleeping cell (once it printed); the heartbeat answers while it sleeps."""
    msg_id = kc.execute("print('sleeping', flush=True)\nimport time\ntime.sleep(120)")
    iopub_until(kc, msg_id, "stream")
    beat_while_busy = ping_heartbeat(km)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    # ipykernel aborts the execute requests it finds queued after a cell's error (stop on
    # error), and stops aborting only after it has answered: a next cell sent the moment the
    # reply arrives is sometimes "aborted" (seen under load with either zmq as the client).
    # A frontend's next cell comes after the kernel is idle again; so does this one.
    iopub_until(kc, msg_id, "status", execution_state="idle")
    return {
        "heartbeat while busy": beat_while_busy,
        "reply to the cell": reply["parent_header"]["msg_id"] == msg_id,
        "status": reply["content"]["status"],
        "ename": reply["content"].get("ename"),
        "next cell": run(kc, "1 + 1"),
    }


async def async_client(connection_file: str) -> dict[str, Any]:
    """kernel_info, execute and an input() round trip through AsyncKernelClient (zmq.asyncio)."""
    akc = AsyncKernelClient(connection_file=connection_file)
    akc.load_connection_file()
    akc.start_channels()
    try:
        await akc.wait_for_ready(timeout=TIMEOUT)
        info = await akc.kernel_info(reply=True, timeout=TIMEOUT)
        shown: list[Message] = []

        async def answer(request: Message) -> None:
            akc.input("async " + request["content"]["prompt"])

        reply = await akc.execute_interactive(
            "print(input('who? '))",
            timeout=TIMEOUT,
            allow_stdin=True,
            stdin_hook=answer,
            output_hook=shown.append,
        )
        return {
            "kernel_info": info["content"]["status"],
            "status": reply["content"]["status"],
            "outputs": outputs(shown),
        }
    finally:
        akc.stop_channels()


def debugger(kc: BlockingKernelClient) -> bool:
    """The debugger's ``initialize`` on the control channel: ipykernel answers it through
    debugpy, which it reaches over its STREAM socket."""
    request = kc.session.msg(
        "debug_request",
        {
            "type": "request",
            "seq": 1,
            "command": "initialize",
            "arguments": {"clientID": "test", "adapterID": "python", "pathFormat": "path"},
        },
    )
    kc.control_channel.send(request)
    while True:
        reply = kc.control_channel.get_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return reply["content"]["success"]


def restart(km: KernelManager, kc: BlockingKernelClient) -> dict[str, Any]:
    """A new kernel process on the same ports: the client's sockets find it again (the iopub
    SUB subscribes anew, or no output would come)."""
    before = km.provisioner.process.pid  # type: ignore[union-attr]
    km.restart_kernel(now=False)
    kc.wait_for_ready(timeout=TIMEOUT)
    return {
        "new process": km.provisioner.process.pid != before,  # type: ignore[union-attr]
        "cell": run(kc, "print('restarted')"),
    }


def shutdown(km: KernelManager, kc: BlockingKernelClient, kernel_log: Path) -> dict[str, Any]:
    """shutdown_kernel: how long it took, how the kernel process ended, what is left."""
    kernel = km.provisioner.process  # type: ignore[union-attr]
    kc.stop_channels()
    started = time.monotonic()
    km.shutdown_kernel(now=False)
    took = time.monotonic() - started
    return {
        # Past shutdown_wait_time / 2 jupyter_client gives up asking and signals (SIGTERM, then
        # SIGKILL): the return code is then negative.
        "returncode": kernel.wait(timeout=TIMEOUT),
        "seconds": took,
        "asked for at most": km.shutdown_wait_time / 2,
        "kernel gone": gone(kernel.pid),
        "processes left": sorted(descendants(os.getpid())),
        "threads left": sorted(
            t.name for t in threading.enumerate() if t is not threading.main_thread()
        ),
        "kernel log": kernel_log.read_text(),
    }


def main() -> None:
    kernel_name, results_path = sys.argv[1], Path(sys.argv[2])
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    results: dict[str, dict[str, Any]] = {}

    def check(name: str, fn: Callable[[], Any]) -> bool:
        try:
            results[name] = {"ok": True, "seen": fn()}
        except Exception:
            results[name] = {"ok": False, "error": traceback.format_exc()}
        return results[name]["ok"]

    results["client zmq"] = {"ok": True, "seen": zmq.__name__}
    km = KernelManager(kernel_name=kernel_name, **options)
    kernel_log = results_path.with_suffix(".kernel.log")
    with kernel_log.open("w") as log:  # open until the end: a restart starts the kernel anew
        run_checks(km, kernel_log, log, check)
    results_path.write_text(json.dumps(results, indent=1))


def run_checks(
    km: KernelManager, kernel_log: Path, log: Any, check: Callable[[str, Callable], bool]
) -> None:
    km.start_kernel(stdout=log, stderr=log)
    kc = km.client()
    kc.start_channels()
    try:
        if not check("ready", lambda: kc.wait_for_ready(timeout=TIMEOUT)):
            return  # the kernel died or never answered: no check below could tell more
        check("kernel zmq", lambda: run(kc, "import zmq\nprint(zmq.__name__, end='')"))
        check("kernel_info", lambda: kc.kernel_info(reply=True, timeout=TIMEOUT)["content"])
        check("execute", lambda: run(kc, "6 * 7"))
        check("stream", lambda: run(kc, "import sys\nprint('out')\nprint('err', file=sys.stderr)"))
        check(
            "input",
            lambda: run(
                kc, "print('got', input('name? '))", allow_stdin=True, stdin_hook=answer_input(kc)
            ),
        )
        check("heartbeat", lambda: [ping_heartbeat(km), kc.is_alive()])
        check("interrupt", lambda: interrupt(km, kc))
        check("async client", lambda: asyncio.run(async_client(km.connection_file)))
        check("debugger", lambda: debugger(kc))
        check("restart", lambda: restart(km, kc))
    finally:
        check("shutdown", lambda: shutdown(km, kc, kernel_log))


if __name__ == "__main__":
    main()
