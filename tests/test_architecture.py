"""Architecture rules for scripts/tunepath and the tools beside it (scripts/harness), checked by
reading their source with ``ast``.

Both packages: no import cycles, no other module's private names, modules and functions within
the size limits. The harness uses tunepath, never the reverse, and no harness module (``bench*``,
``faults*``) sits at tunepath's top level or ships in its wheel. Each ``find_*`` helper returns
every offender (``file:line: what is wrong``), so a failure lists them all; the ``test_checker_*``
tests run the helpers on tiny packages with known faults.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.fast

PKG = ROOT / "scripts" / "tunepath"
HARNESS = ROOT / "scripts" / "harness"
PACKAGES = pytest.mark.parametrize("pkg", [PKG, HARNESS], ids=lambda p: p.name)
HARNESS_PREFIXES = ("bench", "faults")      # what was the harness at tunepath's top level
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
FALLBACK_STEP_NAMES = frozenset({"setup", "baseline", "nic-queues", "numa", "iommu", "connectors", "jvm",
                                 "load-generators", "proxy", "thread-sweep", "rate-sweep", "compare", "summary"})


def modules(pkg: Path) -> dict[str, Path]:
    """Dotted name -> file for every .py file of the package at ``pkg`` (named after its directory)."""
    found = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = (pkg.name, *path.relative_to(pkg).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def by_place(offenders) -> list[str]:  # by file, then line number
    return sorted(offenders, key=lambda o: (o.split(":")[0], int(o.split(":")[1]), o))


def import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import at any depth (module or function level), except in ``if TYPE_CHECKING:`` bodies."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in (getattr(node.test, "id", None),
                                                              getattr(node.test, "attr", None)):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda n: n.lineno)


def imported(node, me: str, is_pkg: bool, known, tops=()) -> list[tuple[str, str, str, str]]:
    """(module imported, alias bound or '', module the alias names, name imported from it or ''), for
    imports from the importer's own package and from the packages ``tops``."""
    tops = {me.split(".")[0], *tops}
    if isinstance(node, ast.Import):  # `import top.a.b` binds `top`; `import top.a.b as x` binds x
        return [(a.name, a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0], "")
                for a in node.names if a.name.split(".")[0] in tops]
    source = node.module or ""
    if node.level:
        base = me.split(".")[:len(me.split(".")) - node.level + (1 if is_pkg else 0)]
        source = ".".join(base + ([node.module] if node.module else []))
    if source.split(".")[0] not in tops:
        return []
    return [(f"{source}.{a.name}", a.asname or a.name, f"{source}.{a.name}", "")
            if f"{source}.{a.name}" in known else (source, "", "", a.name) for a in node.names]


def import_graph(pkg: Path) -> dict[str, dict[str, str]]:
    """Module -> {module it imports: where}, including the packages whose __init__ Python runs first."""
    known = modules(pkg)
    graph: dict[str, dict[str, str]] = {m: {} for m in known}
    for me, path in known.items():
        for node in import_nodes(ast.parse(path.read_text(), str(path))):
            for target, *_ in imported(node, me, path.name == "__init__.py", known):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    dep, implied = ".".join(parts[:i]), i < len(parts)
                    # a package enclosing the importer has necessarily been started already
                    if dep in known and dep != me and not (implied and me.startswith(dep + ".")):
                        graph[me].setdefault(dep, f"{shown(path)}:{node.lineno}"
                                             + (f" (package of {target})" if implied else ""))
    return graph


def find_cycles(graph: dict[str, dict[str, str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module, each sorted."""
    reach = {}
    for v in graph:
        seen, todo = set(), [v]
        while todo:
            for w in graph.get(todo.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        reach[v] = seen
    return sorted({tuple(sorted(w for w in graph if w in reach[v] and v in reach[w])) for v in graph
                   if v in reach[v]}, key=list)


def describe_cycle(scc: tuple[str, ...], graph) -> str:
    return f"cycle among {', '.join(scc)}:" + "".join(
        f"\n      {a} -> {b}  at {graph[a][b]}" for a in scc for b in sorted(graph[a]) if b in scc)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}" if dotted(node.value) else ""
    return node.id if isinstance(node, ast.Name) else ""


def find_private_uses(pkg: Path, *used: Path) -> list[str]:
    """``from tunepath.x import _name``, and ``alias._name`` where alias is an imported tunepath module;
    the same for the modules of the packages ``used`` (the harness uses tunepath)."""
    own, known, offenders = modules(pkg), {}, []
    for other in (pkg, *used):
        known.update(modules(other))
    for me, path in own.items():
        tree, aliases = ast.parse(path.read_text(), str(path)), {}
        for node in import_nodes(tree):
            for target, alias, bound, name in imported(node, me, path.name == "__init__.py", known,
                                                       [u.name for u in used]):
                aliases.update({alias: bound} if alias else {})
                private = name or target.rsplit(".", 1)[-1]
                if is_private(private) and target != me:
                    offenders.append(f"{shown(path)}:{node.lineno}: imports private {private!r} from {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                first, _, rest = dotted(node.value).partition(".")
                module = ".".join(filter(None, (aliases.get(first), rest))) if first in aliases else ""
                if module in known and module != me:
                    offenders.append(f"{shown(path)}:{node.lineno}: uses private "
                                     f"{dotted(node.value)}.{node.attr} of {module}")
    return by_place(offenders)


def find_oversized(pkg: Path, max_module=MAX_MODULE_LINES, max_function=MAX_FUNCTION_LINES) -> list[str]:
    offenders = []
    for path in modules(pkg).values():
        text = path.read_text()
        if len(text.splitlines()) > max_module:
            offenders.append(f"{shown(path)}:1: module has {len(text.splitlines())} lines (max {max_module})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    size := node.end_lineno - node.lineno + 1) > max_function:
                offenders.append(f"{shown(path)}:{node.lineno}: {node.name}() has {size} lines (max {max_function})")
    return by_place(offenders)


def step_names() -> frozenset[str]:
    """The registry's names; else the steps' class attributes ``name = "..."``; else the fixed set."""
    try:
        import tunepath.steps
        return frozenset(s.name for s in tunepath.steps.STEPS)
    except Exception:
        parsed = {stmt.value.value for path in (PKG / "steps").glob("*.py")
                  for cls in ast.walk(ast.parse(path.read_text())) if isinstance(cls, ast.ClassDef)
                  for stmt in cls.body if isinstance(stmt, ast.Assign)
                  and [getattr(t, "id", None) for t in stmt.targets] == ["name"]
                  and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
                  and stmt.value.value}
        return frozenset(parsed or FALLBACK_STEP_NAMES)


def strings(node: ast.AST) -> set[str]:
    """A str constant, or the str constants of a tuple/list/set display."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def find_step_name_comparisons(pkg: Path, names) -> list[str]:
    """Comparisons, membership tests and ``match`` cases against a step's name, outside steps/."""
    offenders = []
    for path in modules(pkg).values():
        if path.relative_to(pkg).parts[0] == "steps":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                hits, what = set().union(*map(strings, (node.left, *node.comparators))) & names, "compares with"
            elif isinstance(node, ast.MatchValue):
                hits, what = strings(node.value) & names, "matches"
            else:
                continue
            if hits:
                names_hit = ", ".join(map(repr, sorted(hits)))
                offenders.append(f"{shown(path)}:{node.lineno}: {what} step name {names_hit}")
    return by_place(offenders)


def find_undeclared_data(pkg: Path, pyproject: Path) -> list[str]:
    """Non-.py files in the package that no ``[tool.setuptools.package-data]`` glob ships."""
    table = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {}).get("package-data", {})
    packages = [p.parent for p in pkg.rglob("__init__.py")]
    declared = {f.resolve() for key, globs in table.items()
                for d in (packages if key in ("*", "") else [pkg.parent.joinpath(*key.split("."))])
                for g in globs for f in d.glob(g)}
    return sorted(f"{shown(f)}: not matched by [tool.setuptools.package-data] in {pyproject.name}"
                  for f in pkg.rglob("*") if f.is_file() and f.suffix != ".py"
                  and "__pycache__" not in f.parts and f.resolve() not in declared)


def report(title: str, offenders: list[str]) -> str:
    return f"{len(offenders)} {title}:\n  " + "\n  ".join(offenders)


def find_imports_of(pkg: Path, top: str) -> list[str]:
    """Imports of the package ``top`` (or of its modules) anywhere in ``pkg``."""
    offenders = []
    for me, path in modules(pkg).items():
        for node in import_nodes(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if not node.level else []
            offenders += [f"{shown(path)}:{node.lineno}: {me} imports {name}" for name in names
                          if name.split(".")[0] == top]
    return by_place(offenders)


def find_top_level(pkg: Path, prefixes=HARNESS_PREFIXES) -> list[str]:
    """Modules or packages at the top of ``pkg`` whose name starts with one of ``prefixes``."""
    return sorted(shown(p) for p in pkg.iterdir() if p.name.startswith(prefixes)
                  and (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())))


def find_shipped(pyproject: Path, package: str) -> list[str]:
    """The ``[tool.setuptools.packages.find]`` include patterns that would put ``package`` in the wheel."""
    found = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {}).get("packages", {})
    include = found.get("find", {}).get("include", ["*"]) if isinstance(found, dict) else found
    return [pattern for pattern in include if fnmatch.fnmatchcase(package, pattern)]


@PACKAGES
def test_imports_form_no_cycle(pkg):
    cycles = [describe_cycle(c, graph) for graph in [import_graph(pkg)] for c in find_cycles(graph)]
    assert not cycles, report(f"import cycles between {pkg.name} modules", cycles)


@PACKAGES
def test_no_private_names_across_modules(pkg):
    used = [PKG] if pkg == HARNESS else []
    assert not (offenders := find_private_uses(pkg, *used)), report("uses of another module's private names",
                                                                    offenders)


@PACKAGES
def test_modules_and_functions_stay_small(pkg):
    assert not (offenders := find_oversized(pkg)), report("modules or functions over the size limits", offenders)


def test_tunepath_never_imports_the_harness():
    """Data flows one way: the harness (scripts/harness) uses tunepath, never the reverse."""
    assert not (offenders := find_imports_of(PKG, HARNESS.name)), report("imports of the harness in tunepath",
                                                                         offenders)


def test_the_harness_stays_out_of_the_package():
    """The benchmarks and the fault harnesses live in scripts/harness/, not at tunepath's top level,
    and tunepath's wheel does not ship them."""
    assert not (offenders := find_top_level(PKG)), report("harness modules at tunepath's top level", offenders)
    assert not (offenders := find_shipped(ROOT / "pyproject.toml", HARNESS.name)), report(
        "include patterns that ship the harness in tunepath's wheel", offenders)
    assert {"bench", "faults"} <= {p.name for p in HARNESS.iterdir() if (p / "__main__.py").is_file()}


def test_only_steps_compare_step_names():
    assert not (offenders := find_step_name_comparisons(PKG, step_names())), report(
        "comparisons with step names outside tunepath/steps/", offenders)


# the modules that drive steps by name; every other module is handed a step object or the registry
ORCHESTRATORS = frozenset({"tunepath.pipeline", "tunepath.cli", "tunepath.publish.build", "tunepath.live.runner"})


def find_registry_imports(graph: dict[str, dict[str, str]]) -> list[str]:
    """Modules outside steps/ and the orchestrators that import the step registry or a step module."""
    return [f"{where}: {me} imports {dep}" for me, deps in graph.items() for dep, where in deps.items()
            if (dep == "tunepath.steps" or dep.startswith("tunepath.steps.")) and dep != "tunepath.steps.base"
            and not me.startswith("tunepath.steps") and me not in ORCHESTRATORS]


def test_only_orchestrators_import_the_registry():
    """Generic layers get the step object or the registry as a parameter: the layers stay below steps/."""
    assert not (offenders := find_registry_imports(import_graph(PKG))), report(
        "imports of the step registry outside the orchestrators", offenders)


def test_package_data_is_declared():
    assert not (offenders := find_undeclared_data(PKG, ROOT / "pyproject.toml")), report(
        "package files that would not be installed", offenders)


# ---- the checker itself, on packages with known faults ------------------------------------------------

def make_package(root: Path, files: dict[str, str], name: str = "tunepath") -> Path:
    for rel, text in files.items():
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text)
    return root / name


def test_checker_finds_a_cycle(tmp_path):
    pkg = make_package(tmp_path, {
        "__init__.py": "", "a/__init__.py": "from . import b\n",
        "a/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tunepath.c import x\n",
        "c.py": "import tunepath.c\ndef f():\n    from tunepath.d import y\n", "d.py": "import tunepath.c as c\n",
        "e.py": "from tunepath.a import b\n", "f.py": "from .a.b import z\n", "a/g.py": "from .. import e\n",
    })
    graph = import_graph(pkg)
    assert set(graph["tunepath.e"]) == set(graph["tunepath.f"]) == {"tunepath.a", "tunepath.a.b"}
    assert graph["tunepath.a.b"] == {}  # TYPE_CHECKING skipped; its own package is no implied edge
    assert set(graph["tunepath.a.g"]) == {"tunepath.e"} and set(graph["tunepath.c"]) == {"tunepath.d"}
    assert find_cycles(graph) == [("tunepath.c", "tunepath.d")]
    assert "tunepath.c -> tunepath.d  at " in describe_cycle(["tunepath.c", "tunepath.d"], graph)
    (pkg / "a" / "b.py").write_text("from tunepath.a import VERSION\n")  # explicitly back to its package
    assert find_cycles(import_graph(pkg)) == [("tunepath.a", "tunepath.a.b"), ("tunepath.c", "tunepath.d")]


def test_checker_finds_private_names(tmp_path):
    pkg = make_package(tmp_path, {
        "__init__.py": "__version__ = '1'\n", "p/__init__.py": "", "p/cache.py": "_files = {}\n_own = _files\n",
        "x.py": "from tunepath.p.cache import _files, __doc__\nfrom tunepath.p import cache\nn = cache._files\n",
        "y.py": "import tunepath.p.cache\nimport tunepath.p.cache as pc\nn = tunepath.p.cache._g + pc._h\n"
                "from tunepath import __version__\nfrom . import _z\nfrom ._z import w\ns = 'a'._b + c._d\n",
        "_z.py": "",
    })
    assert [o.split(": ", 1)[1] for o in find_private_uses(pkg)] == [
        "imports private '_files' from tunepath.p.cache", "uses private cache._files of tunepath.p.cache",
        "uses private pc._h of tunepath.p.cache", "uses private tunepath.p.cache._g of tunepath.p.cache",
        "imports private '_z' from tunepath._z"]


def test_checker_finds_step_names_sizes_and_data(tmp_path, monkeypatch):
    pkg = make_package(tmp_path, {
        "__init__.py": "", "steps/__init__.py": "ok = 'proxy' == 'proxy'\n", "steps/t.txt": "",
        "m.py": "def f(x):\n    a = x == 'proxy'\n    b = x in ('setup', 'other')\n    c = 'summary' != x\n"
                "    d = x == 'other'\n    match x:\n        case 'jvm' | 'z':\n            pass\n"
                + "    e = 1\n" * (MAX_FUNCTION_LINES - 7),
        "data/keep.json": "", "data/lost.csv": "",
    })
    found = find_step_name_comparisons(pkg, FALLBACK_STEP_NAMES)
    assert [o.split(":")[1] for o in found] == ["2", "3", "4", "7"], found
    assert [o.split(": ")[1] for o in find_oversized(pkg)] == [
        f"f() has {MAX_FUNCTION_LINES + 1} lines (max {MAX_FUNCTION_LINES})"]
    assert any(o.endswith(f"module has {MAX_FUNCTION_LINES + 1} lines (max 10)")
               for o in find_oversized(pkg, max_module=10))
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-data]\ntunepath = ["data/*.json"]\n'
                                             '"*" = ["*.txt"]\n')
    assert [Path(o.split(":")[0]).parts[-3:] for o in find_undeclared_data(pkg, tmp_path / "pyproject.toml")] \
        == [("tunepath", "data", "lost.csv")]
    assert "iommu" in step_names() and "iomu" not in step_names()
    imported_names = step_names()
    monkeypatch.setitem(sys.modules, "tunepath.steps", None)  # the registry cannot be imported: parse
    monkeypatch.setitem(globals(), "FALLBACK_STEP_NAMES", frozenset())
    assert step_names() == imported_names


def test_checker_finds_registry_imports():
    graph = {"tunepath.analysis.frames": {"tunepath.steps": "frames.py:3", "tunepath.steps.base": "frames.py:4"},
             "tunepath.pipeline": {"tunepath.steps": "pipeline.py:9"},
             "tunepath.steps.proxy": {"tunepath.steps.base": "proxy.py:5"}}
    assert find_registry_imports(graph) == ["frames.py:3: tunepath.analysis.frames imports tunepath.steps"]


def test_checker_finds_the_harness_in_the_package(tmp_path):
    pkg = make_package(tmp_path, {
        "__init__.py": "", "cli.py": "import harness.faults as f\nfrom harness.bench import run\n",
        "pipeline.py": "def f():\n    from harness import ROOT\n    import harnesses, json\n",
        "benchmarks.py": "", "faults/__init__.py": "", "bench_data/x.txt": "", "faults_notes.txt": "",
        "lab/__init__.py": "from .harness import x\n", "lab/harness.py": "x = 1\n",
    })
    assert [o.split(": ", 1)[1] for o in find_imports_of(pkg, "harness")] == [
        "tunepath.cli imports harness.faults", "tunepath.cli imports harness.bench", "tunepath.pipeline imports harness"]
    assert [Path(o).name for o in find_top_level(pkg)] == ["benchmarks.py", "faults"]
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.setuptools.packages.find]\nwhere = ["scripts"]\ninclude = ["tunepath*"]\n')
    assert find_shipped(pyproject, "harness") == []
    pyproject.write_text('[tool.setuptools.packages.find]\ninclude = ["tunepath*", "h*"]\n')
    assert find_shipped(pyproject, "harness") == ["h*"]


def test_checker_finds_private_names_of_a_used_package(tmp_path):
    pkg = make_package(tmp_path, {"__init__.py": "", "errors.py": "_x = 1\n"})
    tool = make_package(tmp_path, {"__init__.py": "", "a.py": "from tunepath.errors import _x\nimport tunepath.errors\n"
                                   "y = tunepath.errors._x\nfrom harness import _b\n", "_b.py": ""}, "harness")
    assert [o.split(": ", 1)[1] for o in find_private_uses(tool, pkg)] == [
        "imports private '_x' from tunepath.errors", "uses private tunepath.errors._x of tunepath.errors",
        "imports private '_b' from harness._b"]
    assert find_private_uses(tool) == [o for o in find_private_uses(tool, pkg) if "harness._b" in o]
