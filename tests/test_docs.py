"""The documentation site (issue 16): it builds with warnings as errors, the pages made from the
code say what the code says, and the docs' own python blocks run.

The build runs ``mkdocs build --strict`` as ``make docs`` does, into a temporary directory: a
broken link, a missing page, an API object that cannot be found or an include whose section
is gone fails it.  The python blocks written in docs/*.md run as README's do
(tests/test_readme.py); README's own blocks, which some pages include, run there.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from .snippets import ROOT, Running, environment, finish, snippets, started

DOCS = ROOT / "docs"
BUILD_TIMEOUT = 240  # seconds; about 10 s on a quiet machine
TIMEOUT = 60
DOC_SNIPPETS = [
    s for page in sorted(DOCS.glob("*.md")) for s in snippets(page) if s.language == "python"
]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook", DOCS / "hooks" / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = environment() | {"NO_MKDOCS_2_WARNING": "1"}  # Material's banner, not a warning
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    spark = (site / "spark" / "index.html").read_text(encoding="utf-8")
    for option in ("walPath", "maxMessageSize", "rcvhwm", "payloadColumn", "timeoutMs"):
        assert f"<code>{option}</code>" in spark, option
    # the security options, in both tables (the source's and the sink's)
    for option in ("curveServer", "curveServerKey", "curveSecretKey", "plainServer", "zapDomain"):
        assert spark.count(f"<td><code>{option}</code></td>") == 2, option
    assert "Socket.send_multipart" in (site / "api" / "brokerless" / "index.html").read_text(
        encoding="utf-8"
    )
    assert "brokerless stream" in (site / "cli" / "index.html").read_text(encoding="utf-8")
    # the notes for readers of the plain files are not on the site, which shows what they name
    for page in site.rglob("*.html"):
        assert "rendered here by" not in page.read_text(encoding="utf-8"), page


def test_every_directive_says_where_its_text_lives_to_a_plain_file_reader() -> None:
    """Read on GitHub or in an editor, a page shows its directives as nothing: the line under
    each names the file (a relative link that resolves) whose text the site puts there."""
    directive = re.compile(r"^(<!-- (?:include|include-if-present|spark-options): .+ -->|::: )")
    problems = []
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not directive.match(line):
                continue
            after = next((s for s in lines[i + 1 :] if s.strip() and not s.startswith("    ")), "")
            links = re.findall(r"\]\(([^)#]+)", after)
            if not (after.startswith("*(") and "`make docs`" in after):
                problems.append(f"{page.name}:{i + 1}: no note under {line!r}")
            elif not all((page.parent / link).resolve().exists() for link in links):
                problems.append(f"{page.name}:{i + 1}: a link of its note is broken: {after}")
    assert not problems, "\n".join(problems)


def test_the_notes_for_plain_file_readers_are_dropped(tmp_path: Path) -> None:
    hook = _hook()
    page = SimpleNamespace(file=SimpleNamespace(src_uri="x.md"))
    markdown = (
        "# X\n\n<!-- include: BENCHMARKS.md -->\n"
        "*(This page is [BENCHMARKS.md](../BENCHMARKS.md), rendered here by `make docs`.)*\n"
        "\n*(an aside in italics that names no build)*\n"
    )
    out = hook.on_page_markdown(markdown, page, None, None)
    assert "rendered here by" not in out and "*(an aside in italics" in out
    assert out.startswith("# X\n\n") and len(out) > len(markdown)  # BENCHMARKS.md came in


def _source_module(
    root: Path,
    options: tuple[str, ...],
    documented: list[str],
    security: tuple[str, ...] = (),
    security_documented: list[str] | None = None,
) -> None:
    """A source module as the hook reads it: ``_OPTIONS`` (documented: ``documented``), and
    the options of a sibling ``security.py`` that it imports and accepts too, documented in
    its ``PeerSecurity`` (``security_documented``, default ``security``)."""

    def bullets(names: list[str], indent: str) -> str:
        return "\n".join(f"{indent}- ``{name}``: what {name} does." for name in names)

    sec_bullets = bullets(
        list(security) if security_documented is None else security_documented, "    "
    )
    (root / "security.py").write_text(
        f"OPTIONS = {security!r}\n\n"
        f'class PeerSecurity:\n    """Options:\n\n{sec_bullets}\n    """\n',
        encoding="utf-8",
    )
    (root / "source.py").write_text(
        "from .security import OPTIONS as SECURITY_OPTIONS\n"
        f"_OPTIONS = {options!r}\n\n"
        "class SourceConfig:\n"
        "    @classmethod\n"
        "    def from_options(cls, options):\n"
        f'        """Options:\n\n{bullets(documented, "        ")}\n        """\n'
        '        check_known(options, _OPTIONS + SECURITY_OPTIONS, "source")\n',
        encoding="utf-8",
    )


def _options_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    hook = _hook()
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    monkeypatch.setattr(
        hook, "SPARK_OPTIONS", {"source": ("source.py", "SourceConfig.from_options")}
    )
    monkeypatch.setattr(hook, "SECURITY_DOC", ("security.py", "PeerSecurity"))
    return hook


def test_options_table_is_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _options_hook(tmp_path, monkeypatch)
    _source_module(tmp_path, ("endpoints", "rcvhwm"), ["endpoints", "rcvhwm"])
    table = hook.spark_options_table("source").splitlines()
    assert table[2:] == [
        "| `endpoints` | what endpoints does. |",
        "| `rcvhwm` | what rcvhwm does. |",
    ]
    # An option the code accepts and the docstring does not document, and the reverse:
    for accepted, documented in [
        (("endpoints", "ack"), ["endpoints"]),
        (("endpoints",), ["endpoints", "old"]),
    ]:
        _source_module(tmp_path, accepted, documented)
        with pytest.raises(PluginError, match="differ"):
            hook.spark_options_table("source")


def test_options_table_has_the_security_options_documented_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The security options both sides take are documented in ``PeerSecurity`` alone, and
    each side's table shows them."""
    hook = _options_hook(tmp_path, monkeypatch)
    security = ("curveServer", "zapDomain")
    _source_module(tmp_path, ("endpoints",), ["endpoints"], security)
    assert hook.spark_options_table("source").splitlines()[2:] == [
        "| `endpoints` | what endpoints does. |",
        "| `curveServer` | what curveServer does. |",
        "| `zapDomain` | what zapDomain does. |",
    ]
    # A security option left out, or two named in one bullet (which documents neither):
    for documented in (["curveServer"], ["curveServer``, ``zapDomain"]):
        _source_module(tmp_path, ("endpoints",), ["endpoints"], security, documented)
        with pytest.raises(PluginError, match="differ"):
            hook.spark_options_table("source")


def test_include_moves_headings_and_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook()
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text(
        "# Title\n\n## Wanted\n\nSee [the figures](BENCHMARKS.md#results) and "
        "[the code](src/x.py), or [a site](https://example.org/).\n\n"
        "### Part\n\n```sh\n# a comment, not a heading\n```\n\n## Next\n\nnot included\n",
        encoding="utf-8",
    )
    text = hook._expand("include", "README.md#Wanted", "")
    assert text.splitlines() == [
        "",
        "See [the figures](benchmarks.md#results) and the code, or [a site](https://example.org/).",
        "",
        "## Part",
        "",
        "```sh",
        "# a comment, not a heading",
        "```",
    ]
    assert hook._expand("include-if-present", "README.md#Missing", "") == ""
    with pytest.raises(PluginError, match="no section"):
        hook._expand("include", "README.md#Missing", "")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Running]]:
    cwd = tmp_path_factory.mktemp("docs")
    with started(DOC_SNIPPETS, cwd) as running:
        yield running


@pytest.mark.timeout(TIMEOUT + 30)
@pytest.mark.parametrize("name", [s.name for s in DOC_SNIPPETS])
def test_docs_snippet_runs(name: str, running: dict[str, Running]) -> None:
    finish(running[name], TIMEOUT)
