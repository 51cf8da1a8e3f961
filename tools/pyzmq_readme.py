"""README's "pyzmq compatibility" section, from the last ``make pyzmq-suite`` and ``make
pyzmq-examples`` reports (``python tools/pyzmq_suite.py --readme`` prints it).

The per-file table and the examples' result are the measured figures (``.cache/pyzmq/report/``);
``DIFFERENCES`` is what brokerless does differently from pyzmq on purpose or by necessity, each
with where pyzmq's suite or examples show it.  Paste the output over README's section.
"""

from __future__ import annotations

import json
from pathlib import Path

#: (what, pyzmq, brokerless): what differs, and why.
DIFFERENCES: list[tuple[str, str, str]] = [
    (
        "`memoryview(frame)`, `numpy.frombuffer(frame)`",
        "a Frame exports the buffer protocol, writable",
        "from Python 3.12 only (`Frame.__buffer__`, PEP 688). On 3.11 a pure-Python class "
        "cannot export a buffer it only refers to: the builtins that export one and can be "
        "subclassed (`bytes`, `bytearray`, `array.array`) hold a copy of the content, which "
        "would end zero-copy, and `memoryview` and `pickle.PickleBuffer` cannot be subclassed; "
        "use `frame.buffer` (3 suite tests, `serialsocket.py`). The view is read-only when the "
        "frame holds `bytes`, as every frame received over tcp or ipc does (on 3.12, 1 suite "
        "test: `test_noncopying_memoryview`)",
    ),
    (
        "`get_includes()`, `get_library_dirs()`",
        "libzmq's and pyzmq's headers, the bundled libzmq",
        "NotImplementedError saying why: there are no headers or library to build against (2 "
        "suite tests)",
    ),
    (
        "Cython API (`zmq.backend.cython`), shadowing a foreign `zmq_ctx`/socket pointer",
        "yes",
        "no (clear error; EFAULT for a pointer that is not brokerless's own)",
    ),
    (
        "draft API (CLIENT/SERVER, RADIO/DISH, ...), GSSAPI, NORM, VMCI, ws/wss",
        "when libzmq is built with them (pyzmq's wheels: none of these)",
        "no: their options are EINVAL, as in a libzmq built without them",
    ),
    (
        "SOCKS proxy, USE_FD, BINDTODEVICE, tcp/ipc peer filters, RECONNECT_STOP",
        "yes",
        "not honoured: read back their default, any other value is EINVAL naming what is missing",
    ),
    (
        "`bind` to an ipc path another socket listens on",
        "removes the path and binds it (the other listener is left unreachable)",
        "EADDRINUSE; a path left by a listener that is gone is removed and bound, as libzmq",
    ),
    (
        "ROUTER_MANDATORY, ROUTER_HANDOVER, PROBE_ROUTER on a REP",
        "taken (libzmq's REP is a ROUTER inside)",
        "EINVAL: a REP here takes only CONNECT_ROUTING_ID of its ROUTER's options",
    ),
    (
        "zero-copy bookkeeping (`zmq.utils.garbage.gc.refs`, refcounts of a `copy=False` buffer)",
        "a thread holds each buffer until libzmq frees the message",
        "no such thread: the message holds its buffer, `refs` stays empty (3 suite tests assert "
        "pyzmq's exact refcounts)",
    ),
    (
        "IMMEDIATE over inproc, and CONFLATE set by an inproc binder only",
        "ignored: messages queue to a peer not bound yet; only the connecter's CONFLATE counts",
        "honoured, as the options say: with IMMEDIATE nothing queues before the binder exists "
        "(a blocking send waits for it), and either side's CONFLATE conflates",
    ),
    (
        "`zmq.__version__`, `pyzmq_version()`",
        "pyzmq's release",
        "the pyzmq release whose API brokerless implements, 27.3.0, so that code choosing a "
        "path by pyzmq's version takes the one for the API it gets; brokerless's own release is "
        "`brokerless.BROKERLESS_VERSION`",
    ),
    (
        "`Frame(b)` of a `bytes` object",
        "copies it under 64 kB (`COPY_THRESHOLD`): `.bytes` is a new object",
        "keeps it, as it is immutable: `.bytes` is the object itself (other buffers are copied "
        "under the threshold, as in pyzmq; 1 suite test checks identity)",
    ),
    (
        "timing within one process",
        "libzmq's I/O thread runs beside Python",
        "the I/O thread shares the GIL: a subscription made just before a publish in the same "
        "process usually misses it (`test_log.py::test_blank_root_topic` publishes within "
        "microseconds), and a burst sent right after a send that waited for its peer arrives in "
        "two reads, the first message alone (`test_zmqstream.py::test_shadow_socket_close` "
        "expects the rest queued behind it): each passes now and then",
    ),
    (
        "`PUBHandler` whose socket cannot send",
        "the ZMQError escapes `logger.info()`",
        "`handleError`, as logging asks of handlers",
    ),
    (
        "RCVTIMEO/SNDTIMEO in `zmq.green`",
        "ignored (warns)",
        "honoured (warns on set and read, as pyzmq)",
    ),
    (
        "a PLAIN server's ERROR (a wrong password)",
        "libzmq 4.3.5 sends `^RROR` (its C literal `\\x05ERROR` reads as `\\x5E` and "
        "`RROR`), which only its own client takes for an ERROR",
        "the RFC's `\\x05ERROR`: a libzmq 4.3.5 client, refused all the same, reports "
        "HANDSHAKE_FAILED_PROTOCOL (unexpected command) instead of HANDSHAKE_FAILED_AUTH 400. "
        "brokerless's client reads both spellings",
    ),
    (
        "HEARTBEAT_TTL, the peer's last frame data",
        "the TTL is armed only when a PING comes and disarmed by any message: a peer that sent "
        "data and went silent is never timed out",
        "the connection ends when nothing came within the TTL, as zmq_setsockopt(3) says",
    ),
    (
        "a peer of a socket type this one does not talk to",
        "the monitor shows DISCONNECTED only",
        "HANDSHAKE_FAILED_PROTOCOL, then DISCONNECTED; the peer gets an ERROR command saying "
        "why (RFC 37). Neither side reconnects, as with libzmq",
    ),
    (
        "a `ZMQStream` `on_recv` callback that raises",
        "the error is logged and the stream delivers nothing more (the messages queued "
        "behind it, and later ones, wait for an event that never comes)",
        "the error is logged and the stream goes on with the next message",
    ),
    (
        "asyncio futures waiting when the context is terminated",
        "stay pending (the loop logs ContextTerminated from its event handler)",
        "fail with ContextTerminated",
    ),
    (
        "several greenlets waiting on one `zmq.green` socket; `term()` from a greenlet while "
        "another still has a socket open",
        "AssertionError (one waiter per socket); `term()` blocks the hub's thread, so the "
        "greenlet that would close the socket never runs",
        "each waiter served in turn; `term()` waits off the hub and wakes blocked greenlets "
        "with ETERM",
    ),
    (
        "context THREAD_SCHED_POLICY, THREAD_PRIORITY, THREAD_NAME_PREFIX",
        "applied to libzmq's threads",
        "accepted and read back as libzmq does, not applied: the I/O threads keep the process's "
        "scheduling and their names (`brokerless-io-N`). THREAD_AFFINITY_CPU_ADD/_REMOVE are "
        "applied, as libzmq's: I/O threads started afterwards keep to the CPUs added",
    ),
]


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def section(report_dir: Path) -> str:
    suite = json.loads((report_dir / "pyzmq_suite.json").read_text())
    examples = json.loads((report_dir / "pyzmq_examples.json").read_text())
    rows = [r for r in suite["rows"] if r["pyzmq_passes"]]
    mine = sum(r["brokerless_passes"] for r in rows)
    theirs = sum(r["pyzmq_passes"] for r in rows)
    out = [
        "## pyzmq compatibility",
        "",
        f"pyzmq {suite['pyzmq_version']}'s own test suite, unmodified, run on brokerless through "
        "the `zmq` alias (`python -m brokerless.compat.as_zmq`; `make pyzmq-suite`, brokerless "
        f"{suite['brokerless_commit']}, {suite['date']}): **brokerless passes {mine} of the "
        f"{theirs} tests pyzmq passes here ({_percent(mine, theirs)})**. A test counts when it "
        "passes on both; files where pyzmq passes nothing here (draft API, cffi backend, "
        "Cython) are left out.",
        "",
        "| pyzmq test file | pyzmq passes | brokerless passes |",
        "|---|--:|--:|",
    ]
    out += [f"| {r['file']} | {r['pyzmq_passes']} | {r['brokerless_passes']} |" for r in rows]
    out.append(f"| **total** | **{theirs}** | **{mine}** |")
    results = examples["results"]
    on_pyzmq = [name for name, sides in results.items() if sides["pyzmq"]["passed"]]
    on_both = [name for name in on_pyzmq if results[name]["brokerless"]["passed"]]
    failing = [name for name in on_pyzmq if name not in on_both]
    out += [
        "",
        f"pyzmq's examples (`make pyzmq-examples`, tests/test_pyzmq_examples.py): brokerless "
        f"runs **{len(on_both)} of the {len(on_pyzmq)}** driven examples that run on pyzmq"
        + (
            " (not: "
            + ", ".join(f"`{n}`: {results[n]['brokerless']['reason']}" for n in failing)
            + ")"
            if failing
            else ""
        )
        + f"; {len(results) - len(on_pyzmq)} fail on pyzmq itself, "
        f"{len(examples['not_driven'])} are not programs one can drive here (Cython, MongoDB, "
        "draft API, Windows).",
        "",
        "What differs:",
        "",
        "| | pyzmq | brokerless |",
        "|---|---|---|",
    ]
    out += [f"| {what} | {pyzmq} | {mine_} |" for what, pyzmq, mine_ in DIFFERENCES]
    return "\n".join(out) + "\n"
