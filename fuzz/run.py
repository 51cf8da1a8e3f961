"""Run the fuzz targets: coverage-guided, with atheris (libFuzzer for CPython).

Theory of operation
-------------------
A *target* is any module ``fuzz/<name>.py`` other than this one and ``_``-prefixed ones; it
exposes ``test_one_input(data: bytes) -> None``, which returns for every input the code under
test handles as it should (refusing it with its own error included) and raises only for a bug.
Its saved corpus is ``fuzz/corpus/<name>/``: small inputs, committed, replayed by
``tests/test_fuzz_corpus.py`` in every ``make test``.  A target may also offer ``seeds()``, the
hand-made inputs ``--seed`` writes into its corpus.

``make fuzz`` runs every target in turn, each in its own process for ``FUZZ_SECONDS`` (60 by
default), starting from its corpus.  What a run finds interesting goes to ``.fuzz/new/<name>/``
(not committed) and crashing inputs to ``.fuzz/crashes/<name>/``; ``--merge`` folds into the
committed corpus only the new inputs that reach code it does not already reach.

atheris was chosen over hypothesis-driven generation because it is coverage-guided (it keeps the
inputs that reach new branches of the instrumented ``brokerless`` code, so it gets past the
greeting and the handshake into traffic on its own) and runs about 10^4 to 10^5 inputs a second
here; it installs from a wheel on CPython 3.11 (the ``fuzz`` extra).

    python -m fuzz.run                     # every target, FUZZ_SECONDS each
    python -m fuzz.run zmtp_codec --seconds 300
    python -m fuzz.run --seed              # write the targets' seeds into their corpora
    python -m fuzz.run --merge             # keep what the last runs found that adds coverage
    python -m fuzz.run --replay            # every corpus file through its target, no atheris
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
SCRATCH = ROOT / ".fuzz"
MAX_LEN = 4096  # octets: keeps the corpus small and each input fast
LIBFUZZER_FLAGS = [f"-max_len={MAX_LEN}", "-timeout=10", "-rss_limit_mb=2048"]


def targets() -> list[str]:
    """The names of the fuzz targets, sorted."""
    return sorted(
        path.stem
        for path in FUZZ.glob("*.py")
        if path.stem != "run" and not path.stem.startswith("_")
    )


def load(name: str) -> ModuleType:
    return importlib.import_module(f"fuzz.{name}")


def corpus(name: str) -> Path:
    return FUZZ / "corpus" / name


def corpus_files(name: str) -> list[Path]:
    directory = corpus(name)
    return sorted(directory.iterdir()) if directory.is_dir() else []


# -- the worker: one target under atheris, in its own process ------------------------------------


def _work(name: str, flags: list[str]) -> None:
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install -e '.[fuzz]'")
    with atheris.instrument_imports(include=["brokerless", f"fuzz.{name}"]):
        target = load(name)
    # libFuzzer runs argv[0] through the shell for the processes it starts (--merge does):
    # make it the command that starts this worker again.
    itself = shlex.join([sys.executable, "-m", "fuzz.run", "--worker", name, "--"])
    atheris.Setup([itself, *flags], target.test_one_input)
    atheris.Fuzz()


def _spawn(name: str, flags: list[str], timeout: float) -> tuple[int, str]:
    """Run the worker for ``name``; its exit status and output (also kept in .fuzz/logs/)."""
    logs = SCRATCH / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "fuzz.run", "--worker", name, "--", *flags]
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, errors="replace", timeout=timeout
        )
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        status, output = -1, f"{exc.stdout or ''}{exc.stderr or ''}\nworker timed out"
    (logs / f"{name}.log").write_text(output)
    return status, output


def _stat(output: str, key: str) -> str:
    found = re.findall(rf"stat::{key}:\s*(\d+)", output)
    return found[-1] if found else "?"


def fuzz(name: str, seconds: int) -> bool:
    """Fuzz one target for ``seconds``; prints a summary line; False if it found a crash."""
    new, crashes = SCRATCH / "new" / name, SCRATCH / "crashes" / name
    new.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    corpus(name).mkdir(parents=True, exist_ok=True)
    before = set(crashes.iterdir())
    flags = [
        *LIBFUZZER_FLAGS,
        f"-max_total_time={seconds}",
        f"-artifact_prefix={crashes}/",
        "-print_final_stats=1",
        str(new),
        str(corpus(name)),
    ]
    status, output = _spawn(name, flags, timeout=seconds + 120)
    found = sorted(set(crashes.iterdir()) - before)
    print(
        f"{name}: {_stat(output, 'number_of_executed_units')} inputs in {seconds} s, "
        f"{_stat(output, 'average_exec_per_sec')} inputs/s, "
        f"{_stat(output, 'new_units_added')} new interesting inputs in {new.relative_to(ROOT)}, "
        f"corpus {len(corpus_files(name))} files; "
        + (f"CRASH (status {status}): {', '.join(map(str, found))}" if status or found else "ok")
    )
    if status or found:
        print(output[-4000:])
    return not (status or found)


def merge(name: str) -> None:
    """Add to the committed corpus the inputs from .fuzz/new/ that reach new coverage."""
    new = SCRATCH / "new" / name
    if not new.is_dir():
        print(f"{name}: nothing to merge")
        return
    count = len(corpus_files(name))
    corpus(name).mkdir(parents=True, exist_ok=True)
    status, output = _spawn(
        name, [*LIBFUZZER_FLAGS, "-merge=1", str(corpus(name)), str(new)], timeout=600
    )
    if status:
        print(output[-4000:])
        raise SystemExit(f"{name}: merge failed (status {status})")
    print(f"{name}: corpus {count} -> {len(corpus_files(name))} files")


def seed(name: str) -> None:
    """Write the target's ``seeds()`` into its corpus, named by content as libFuzzer does."""
    make = getattr(load(name), "seeds", None)
    if make is None:
        return
    directory = corpus(name)
    directory.mkdir(parents=True, exist_ok=True)
    for data in make():
        (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{name}: corpus {len(corpus_files(name))} files")


def replay(name: str) -> int:
    """Every corpus file through the target (``make test`` does it, in
    tests/test_fuzz_corpus.py); how many there were."""
    target = load(name)
    files = corpus_files(name)
    for path in files:
        try:
            target.test_one_input(path.read_bytes())
        except Exception as exc:
            raise AssertionError(f"{name}: corpus file {path.name} fails") from exc
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help=f"default: all ({', '.join(targets())})")
    parser.add_argument(
        "--seconds",
        type=int,
        default=int(os.environ.get("FUZZ_SECONDS", "60")),
        help="per target (default: $FUZZ_SECONDS or 60)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--seed", action="store_true", help="write the targets' seeds")
    action.add_argument("--merge", action="store_true", help="merge .fuzz/new into the corpus")
    action.add_argument("--replay", action="store_true", help="replay the corpus, no atheris")
    action.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:  # the worker's libFuzzer flags follow "--"
        cut = argv.index("--")
        argv, flags = argv[:cut], argv[cut + 1 :]
    else:
        flags = []
    args = parser.parse_args(argv)
    names = args.targets or targets()
    unknown = set(names) - set(targets())
    if unknown:
        parser.error(f"no such target: {', '.join(sorted(unknown))}")
    if args.worker:
        _work(names[0], flags)
        return 0
    ok = True
    for name in names:
        if args.seed:
            seed(name)
        elif args.merge:
            merge(name)
        elif args.replay:
            print(f"{name}: {replay(name)} corpus files replayed")
        else:
            ok &= fuzz(name, args.seconds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
