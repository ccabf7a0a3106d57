"""The documentation names only what exists.

README.md and docs/*.md name modules and files: ``scripts/tunepath/parse/wrk.py``, the short form
``parse/wrk.py`` (relative to ``scripts/tunepath/``), ``live/restore.reboot_to_original``, the
dotted ``tunepath.analysis.stats``, ``tests/test_x.py``, ``layouts/...``, links such as
``[x](faults/results.json)``. Each must exist in the repository, and a name after a module
(``module.attr``) must occur in that module's source. Not checked: patterns (``runs/<id>/``), what a
build or run writes (``static/charts/``, ``lab/hosts.toml``), ```` ```json ```` examples of data, and
paths of another repository between ``<!-- other-repository: NAME -->`` and
``<!-- /other-repository -->`` (docs/upstream.md). The README stays a front door: at most 150
lines, and every image it shows exists. docs/architecture.md gives every layer of the package
one section, once, and every module carries its own docstring (module detail lives there).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.fast

PKG = ROOT / "scripts" / "tunepath"
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
README_MAX_LINES = 150

# folders of the repository a path may start with, and the package's layers (short forms)
TOP = (".ci", ".github", "scripts", "tests", "docs", "layouts", "content", "notebooks", "runs", "static")
LAYERS = tuple(sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()))
# written by a build, a run or `tunepath lab up`, never committed
GENERATED = ("static/charts", "static/notebooks", "runs/.inprogress", "tests/browser/node_modules")
LAB_OUTPUT = {"lab/hosts.toml", "lab/hosts-self.toml", "lab/known_hosts", "lab/state.json", "lab/id_ed25519"}
EXTENSIONS = ("py", "md", "json", "toml", "sh", "html", "ipynb", "patch", "jmx", "lock", "css", "yml", "yaml",
              "png", "svg", "txt", "cfg")

_URL = re.compile(r"\b[a-z]+://\S+")
_PATH = re.compile(r"(?<![\w./~$@-])((?:%s)/[\w./-]*)" % "|".join(map(re.escape, TOP + LAYERS + ("tunepath", "harness"))))
_DOTTED = re.compile(r"(?<![\w./~$-])tunepath(?:\.[A-Za-z_]\w*)+")
_BARE_PY = re.compile(r"(?<![\w./~$-])([A-Za-z_][\w-]*\.py)\b")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_PLACEHOLDER = "<*{…[$"


def names(text: str):
    """Every (kind, token) a Markdown text names: paths, dotted modules, bare .py names, link targets."""
    for m in _LINK.finditer(text):
        if not _URL.match(m[1]) and not m[1].startswith("mailto:"):
            yield "link", m[1]
    text = _URL.sub(" ", text)
    for m in _PATH.finditer(text):
        token, after = m[1].rstrip(".,;:"), text[m.end():m.end() + 1]
        if after and after in _PLACEHOLDER or token.endswith("-"):
            continue                    # a pattern such as runs/<id>/ or notebooks/NN-<name>.ipynb
        yield "path", token
    for m in _DOTTED.finditer(text):
        yield "dotted", m[0].rstrip(".")
    for m in _BARE_PY.finditer(text):
        yield "bare", m[1]


def module_file(dotted: str) -> Path | None:
    """scripts/tunepath/a/b.py or a/b/__init__.py for ``tunepath.a.b``."""
    base = PKG.parent.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def defines(module: Path, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", module.read_text(encoding="utf-8")) is not None


def dotted_exists(dotted: str) -> bool:
    """The longest prefix that is a module exists, and the next name occurs in its source."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:i]))
        if found:
            return i == len(parts) or defines(found, parts[i])
    return False


def path_exists(token: str) -> bool:
    token = token.rstrip("/") + ("/" if token.endswith("/") else "")
    if token.startswith(GENERATED) or token in LAB_OUTPUT:
        return True
    first = token.split("/", 1)[0]
    where = ROOT / token if first in TOP else PKG.parent / token if first in ("tunepath", "harness") else PKG / token
    if where.exists():
        return True
    stem, dot, attr = token.rpartition("/")[2].partition(".")
    if not dot and not token.endswith("/"):                   # a short form of a module: publish/build
        return where.with_suffix(".py").is_file()
    if dot and attr.rsplit(".", 1)[-1] not in EXTENSIONS:   # a short form with a name: live/restore.put_back
        module = where.parent / f"{stem}.py"
        return module.is_file() and defines(module, attr.split(".")[0])
    return False


def bare_exists(name: str) -> bool:
    return any(p.is_file() for base in (ROOT / "scripts", ROOT / "tests") for p in base.rglob(name))


def missing_names(doc: Path, text: str | None = None) -> list[str]:
    """``doc:line: token`` for every name in ``doc`` that does not exist."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    found, skip = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if skip is None and (m := re.match(r"\s*(```json|<!-- other-repository: )", line)):
            skip = "```" if m[1].startswith("`") else "<!-- /other-repository -->"
            continue
        if skip is not None:
            skip = None if line.strip().startswith(skip) else skip
            continue
        for kind, token in names(line):
            ok = {"link": lambda t: (doc.parent / t).exists(), "path": path_exists,
                  "dotted": dotted_exists, "bare": bare_exists}[kind](token)
            if not ok:
                found.append(f"{doc.relative_to(ROOT)}:{number}: {kind} {token}")
    return found


def test_every_named_module_and_file_exists():
    missing = [m for doc in DOCS for m in missing_names(doc)]
    assert not missing, f"{len(missing)} names in the docs that do not exist:\n  " + "\n  ".join(missing)


def test_the_checker_sees_bad_names():
    """Each form of a wrong name is reported; the right ones and patterns are not."""
    doc = ROOT / "docs" / "example.md"
    bad = ("see `scripts/tunepath/parse/wrkk.py`, `parse/nothing.py`, `publish/charts.nope` and\n"
           "`tunepath.analysis.statz`, `tunepath.analysis.stats.no_such_name`, `tests/test_nope.py`,\n"
           "`layouts/_partials/none.html`, [a link](nowhere.md), `bench_nope.py` and\n"
           "`scripts/harness/faults/trial.py`, `harness/faults/nope.py`, `publish/nothing`\n")
    good = ("`scripts/tunepath/parse/wrk.py`, `parse/siege.py`, `publish/swap.py`, `tunepath.analysis.stats`,\n"
            "`live/restore.reboot_to_original`, `tunepath.model.shell.quote`, `runs/<id>/run.json`,\n"
            "`notebooks/NN-<name>.ipynb`, `lab/hosts.toml`, `~/.tunepath/lock`, [s](statistics.md#tests),\n"
            "https://example.org/docs/x.md, `steps/templates/*`, `pipeline.py`, `publish/build`,\n"
            "`scripts/harness/faults/harness.py`, `harness/bench/run.py`, `scripts/harness/`\n"
            "```json\n{\"html\": \"notebooks/02-baseline.html\"}\n```\n"
            "<!-- other-repository: ArmDeveloperEcosystem/arm-learning-paths -->\n"
            "`tools/verify_index_fields.py`, `.github/workflows/test-lp.yml`\n<!-- /other-repository -->\n")
    assert sorted(m.split(": ", 1)[1] for m in missing_names(doc, bad)) == sorted([
        "path scripts/tunepath/parse/wrkk.py", "path parse/nothing.py", "path publish/charts.nope",
        "dotted tunepath.analysis.statz", "dotted tunepath.analysis.stats.no_such_name", "path tests/test_nope.py",
        "path layouts/_partials/none.html", "link nowhere.md", "bare bench_nope.py",
        "path scripts/harness/faults/trial.py", "path harness/faults/nope.py", "path publish/nothing"])
    assert missing_names(doc, good) == []


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", text) + re.findall(r"<img [^>]*src=\"([^\"]+)\"", text)
    assert images, "README.md shows no screenshot"
    assert all((ROOT / i).is_file() for i in images), images
    for command in ("scripts/run", "scripts/test"):
        assert command in text


def test_architecture_gives_each_layer_one_section():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    headed = re.findall(r"^### `(\w+)/`", text, re.M)
    assert sorted(headed) == sorted(LAYERS), f"layers {LAYERS}, sections {headed}"


def test_every_module_has_a_docstring():
    bare = [str(p.relative_to(ROOT)) for p in sorted(PKG.rglob("*.py"))
            if not (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").strip()]
    assert not bare, f"modules without a docstring: {bare}"
