"""MkDocs hook: pages that take their text from the repository, so the site cannot drift.

A page writes a directive as an HTML comment on a line of its own; the hook replaces it before
the page is rendered:

``<!-- include: PATH -->``
    the file ``PATH`` (from the repository's root) without its title (its first ``#`` line);
``<!-- include: PATH#Heading -->``
    the section of ``PATH`` under that heading, down to the next heading of its level or above;
``<!-- include-if-present: PATH#Heading -->``
    the same, or nothing when the file has no such section (for a section another change adds);
``<!-- spark-options: source -->`` / ``<!-- spark-options: sink -->``
    a table of the Structured Streaming options, read from the code: the option names the
    source or sink accepts (the tuples it gives ``check_known``: its own ``_OPTIONS`` and the
    security options it imports from ``security.py``) and the bullet list, one option per
    bullet, that documents them in its docstring (``SourceConfig.from_options``,
    ``SinkConfig``).  A name in one and not in the other fails the build.

A line of its own in italic parentheses that names ``make docs`` -- ``*(This section is
[README.md § Security](../README.md#security), rendered here by `make docs`.)*`` -- is a note
for whoever reads the page as a plain file (on GitHub, in an editor), where the directives
show nothing; the hook drops it, as the site shows what it points to.

Included text is adjusted to its new place: its headings move down so that the shallowest is
``##``, and its relative links are rewritten -- to the page that shows the linked file on the
site (``BENCHMARKS.md``, ``examples/guide/``, a page under ``docs/``), or, for any other file
of the repository, to the link's text alone, since the site does not carry those files.  Lines
inside fenced code blocks are left as they are.

Every failure (a missing file or section, an unknown directive, options that disagree) raises
``PluginError``, so ``mkdocs build --strict`` stops with the reason.
"""

from __future__ import annotations

import ast
import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]

#: Repository files that a page of the site shows: a link to one goes to that page.
SHOWN_AT = {
    "README.md": "index.md",
    "BENCHMARKS.md": "benchmarks.md",
    "examples/guide": "guide.md",
    "examples/guide/README.md": "guide.md",
}

#: Where each side's options are defined and documented; the security options both take are
#: documented once, in ``SECURITY_DOC``.
SPARK_OPTIONS = {
    "source": ("src/brokerless/spark/source_config.py", "SourceConfig.from_options"),
    "sink": ("src/brokerless/spark/sink.py", "SinkConfig"),
}
SECURITY_DOC = ("src/brokerless/spark/security.py", "PeerSecurity")

_DIRECTIVE = re.compile(r"^<!-- (include|include-if-present|spark-options): (.+?) -->$", re.M)
_PLAIN_FILE_NOTE = re.compile(r"^\*\([^\n]*`make docs`[^\n]*\)\*[ \t]*(?:\n|\Z)", re.M)
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) ")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_BULLET = re.compile(r"^- ``(\w+)``(?: \((required)\))?: (.*)$")
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?([\w.]+)`")


def on_page_markdown(markdown: str, page, config, files) -> str:
    page_dir = posixpath.dirname(page.file.src_uri)
    markdown = _PLAIN_FILE_NOTE.sub("", markdown)
    return _DIRECTIVE.sub(lambda m: _expand(m.group(1), m.group(2), page_dir), markdown)


def _expand(kind: str, arg: str, page_dir: str) -> str:
    if kind == "spark-options":
        return spark_options_table(arg)
    path, _, heading = arg.partition("#")
    text = _read(path)
    if not heading:
        lines = text.splitlines()
        body = "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines)
    else:
        body = _section(text, heading)
        if body is None:
            if kind == "include-if-present":
                return ""
            raise PluginError(f"{path} has no section {heading!r}")
    return _adjust(body, posixpath.dirname(path), page_dir)


def _read(path: str) -> str:
    file = ROOT / path
    if not file.is_file():
        raise PluginError(f"included file {path} does not exist")
    return file.read_text(encoding="utf-8")


def _outside_fences(lines: list[str]) -> list[bool]:
    """For each line, whether it is Markdown text (not inside or on a fenced code block)."""
    flags, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            flags.append(False)
        else:
            flags.append(not fenced)
    return flags


def _section(text: str, heading: str) -> str | None:
    """The lines under ``heading`` (matched case-insensitively) down to the next heading of
    its level or above, or None."""
    lines = text.splitlines()
    level = None
    start = 0
    for i, (line, is_text) in enumerate(zip(lines, _outside_fences(lines), strict=True)):
        found = _HEADING.match(line) if is_text else None
        if found is None:
            continue
        depth = len(found.group(1))
        if level is None:
            if line[depth + 1 :].strip().lower() == heading.strip().lower():
                level, start = depth, i + 1
        elif depth <= level:
            return "\n".join(lines[start:i])
    return None if level is None else "\n".join(lines[start:])


def _adjust(body: str, source_dir: str, page_dir: str) -> str:
    lines = body.splitlines()
    text_flags = _outside_fences(lines)
    depths = [
        len(m.group(1))
        for line, is_text in zip(lines, text_flags, strict=True)
        if is_text and (m := _HEADING.match(line))
    ]
    shift = 2 - min(depths) if depths else 0
    out = []
    for line, is_text in zip(lines, text_flags, strict=True):
        if is_text:
            if (m := _HEADING.match(line)) and shift:
                line = "#" * (len(m.group(1)) + shift) + line[len(m.group(1)) :]
            line = _LINK.sub(lambda m: _relink(m, source_dir, page_dir), line)
        out.append(line)
    return "\n".join(out)


def _relink(match: re.Match[str], source_dir: str, page_dir: str) -> str:
    bang, label, target = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return match.group(0)  # a public URL, or an anchor on the same page
    path, _, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(source_dir, path))
    page = SHOWN_AT.get(repo_path)
    if page is None and repo_path.startswith("docs/") and (ROOT / repo_path).is_file():
        page = repo_path.removeprefix("docs/")
    if page is None or bang:
        return label  # a file the site does not carry: its name, as the text says it
    link = posixpath.relpath(page, page_dir or ".")
    return f"[{label}]({link}{'#' + anchor if anchor else ''})"


def spark_options_table(side: str) -> str:
    """The Markdown table of the options of the Structured Streaming ``side``."""
    if side not in SPARK_OPTIONS:
        raise PluginError(f"spark-options: {side!r} is neither {' nor '.join(SPARK_OPTIONS)}")
    path, qualname = SPARK_OPTIONS[side]
    module = ast.parse(_read(path))
    accepted = _accepted_options(module, path)
    documented = _documented_options(_docstring(module, qualname, path))
    security_path, security_qualname = SECURITY_DOC
    security = ast.parse(_read(security_path))
    documented += _documented_options(_docstring(security, security_qualname, security_path))
    names = [name for name, _, _ in documented]
    if sorted(names) != sorted(accepted):
        raise PluginError(
            f"{path}: the options {side} accepts ({', '.join(accepted)}) and those "
            f"{qualname}'s docstring documents ({', '.join(names)}) differ"
        )
    rows = ["| Option | Meaning |", "| --- | --- |"]
    for name, required, meaning in documented:
        note = " **(required)**" if required else ""
        rows.append(f"| `{name}`{note} | {meaning} |")
    return "\n".join(rows)


def _accepted_options(module: ast.Module, path: str) -> list[str]:
    """The option names ``path`` accepts: the second argument of its one ``check_known`` call
    (``_OPTIONS + SECURITY_OPTIONS``), each name in it resolved to the tuple it is bound to in
    the module or, for a name imported from a sibling module, in that module."""
    calls = [
        node
        for node in ast.walk(module)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "check_known"
        and len(node.args) >= 2
    ]
    if len(calls) != 1:
        raise PluginError(
            f"{path}: expected one check_known(options, NAMES, ...) call, found {len(calls)}"
        )
    names: list[str] = []
    for part in _summands(calls[0].args[1]):
        if isinstance(part, ast.Tuple):
            names += [ast.literal_eval(element) for element in part.elts]
        elif isinstance(part, ast.Name):
            names += _options_tuple(module, path, part.id)
        else:
            raise PluginError(f"{path}: cannot read check_known's option names")
    return names


def _summands(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _summands(node.left) + _summands(node.right)
    return [node]


def _options_tuple(module: ast.Module, path: str, name: str) -> list[str]:
    """The tuple of option names ``name`` is bound to in ``module`` (the file ``path``),
    following ``from .other import NAME as name``."""
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == [name]
            and isinstance(node.value, ast.Tuple)
        ):
            return [ast.literal_eval(element) for element in node.value.elts]
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    other = posixpath.join(
                        posixpath.dirname(path), node.module.replace(".", "/") + ".py"
                    )
                    return _options_tuple(ast.parse(_read(other)), other, alias.name)
    raise PluginError(f"{path} has no tuple of option names {name}")


def _docstring(module: ast.Module, qualname: str, path: str) -> str:
    scope: list[ast.stmt] = module.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next(
            (n for n in scope if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part),
            None,
        )
        if node is None:
            raise PluginError(f"{path} has no {qualname}")
        scope = node.body
    doc = ast.get_docstring(node) if node is not None else None
    if not doc:
        raise PluginError(f"{path}: {qualname} has no docstring")
    return doc


def _documented_options(doc: str) -> list[tuple[str, bool, str]]:
    """``(name, required, meaning)`` for each ``- ``name`` [(required)]: meaning`` bullet,
    its continuation lines joined, reStructuredText markup turned into Markdown."""
    found: list[list] = []
    current: list | None = None
    for line in doc.splitlines():
        if m := _BULLET.match(line):
            current = [m.group(1), m.group(2) is not None, m.group(3)]
            found.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current[2] += " " + line.strip()
        else:
            current = None  # a blank or unindented line ends the bullet
    options = []
    for name, required, meaning in found:
        meaning = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", meaning)
        options.append((name, required, meaning.replace("``", "`").replace("|", "\\|")))
    return options
