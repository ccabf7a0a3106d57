"""The commands that write the site or read a lab: ``tunepath export`` (into the project's own
sources; ``--check`` of a damaged export), ``tunepath notebooks`` (a directory holding a user's own
notebook, a file, FIFOs and directories named like notebooks), ``tunepath build`` (a site directory
holding foreign files, destinations that are the project's content or a foreign folder) and
``tunepath lab status`` (a state file that is a FIFO, a directory or damaged JSON; never ``lab
up`` or ``down``).

Each runs against a copy of the project in its directory (``TUNEPATH_PROJECT``); builds replay
one step (``--steps baseline``) of three small runs, but for the one case that needs Hugo to
publish (a foreign file in the site directory's ``public/``): the whole path, about 20 s here.
"""

from __future__ import annotations

from pathlib import Path

from harness.census.case import ACCEPT, REFUSE, Case
from harness.census.sandbox import ALL_RUNS
from harness.census.cases.inputs import all_of, directory, fifo, put, sparse, unchanged, writes

__all__ = ["RUNS", "USER_NOTEBOOK", "cases"]

RUNS = ("reference-aws-c8g", "reference-grace", "sandbox-wrk2-rate-sweep")
USER_NOTEBOOK = ('{"cells": [{"cell_type": "markdown", "id": "mine", "metadata": {}, "source": ["my analysis"]}], '
                 '"metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
MINE = "mine: not written by tunepath\n"
CATEGORY_DIR = "content/learning-paths/servers-and-cloud-computing"
EXPORT = "export/" + CATEGORY_DIR + "/tune-network-workloads-on-bare-metal"
INDEX = "---\ntitle: A path\nminutes_to_complete: 30\n---\n"
NEXT = "---\nnext_step_guidance: none\n---\n"
BILLION_LAUGHS = "---\n" + "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")) + "---\n"


def export_cases() -> list[Case]:
    def up(name: str, dest: str, note: str, *setups) -> Case:
        return Case(f"export/upstream/{name}", "export", ("export", "--upstream", dest), REFUSE, project=(),
                    setup=all_of(*setups), watch=("upstream",), note=note)
    out = [
        up("project-itself", "{tmp}/project", "--upstream the project: the export would land in its content/"),
        up("project-content", "{tmp}/project/content", "--upstream the project's content/"),
        up("project-runs", "{tmp}/project/runs/x", "--upstream inside the project's runs/"),
        up("project-notebooks", "{tmp}/project/notebooks", "--upstream the project's notebooks/"),
        up("project-scripts", "{tmp}/project/scripts", "--upstream the project's scripts/"),
        up("project-static", "{tmp}/project/static/upstream", "--upstream inside the project's static/"),
        up("a-file", "{tmp}/upstream/file", "--upstream is a file", writes("upstream/file", lambda: MINE)),
        up("no-build", "{tmp}/upstream", "a new directory, but the project was never built", _unbuilt),
        Case("export/upstream/run-missing", "export", ("export", "--upstream", "{tmp}/upstream", "--run", "nosuch"),
             REFUSE, project=(), watch=("upstream",), note="--run names no run"),
        Case("export/check-with-run", "export", ("export", "--check", "{tmp}/export", "--run", "x"), REFUSE,
             project=(), setup=_export(), watch=("export",), note="--check with --run"),
    ]
    return out + _check_cases()


def _unbuilt(tmp) -> None:
    """The project copy as a checkout that was never built: no built data, no charts (the checkout
    the census runs from may have been built: its data/ and static/charts/ are copied with it)."""
    import shutil

    for built in ("data/steps", "data/summary.json", "data/path.json", "static/charts"):
        target = tmp / "project" / built
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


def _export(*damage) -> object:
    """A hand-made exported path (index and next-steps pages) in tmp/export, then ``damage``."""
    return all_of(writes(f"{EXPORT}/_index.md", lambda: INDEX), writes(f"{EXPORT}/_next-steps.md", lambda: NEXT),
                  *damage)


def _check_cases() -> list[Case]:
    def check(name: str, note: str, *damage, target: str = "{tmp}/export") -> Case:
        return Case(f"export/check/{name}", "export", ("export", "--check", target), REFUSE, project=(),
                    setup=_export(*damage), watch=("export",), note=note)
    return [
        check("no-next-steps", "no _next-steps.md", lambda tmp: (tmp / EXPORT / "_next-steps.md").unlink()),
        check("front-matter-unclosed", "_index.md's front matter never closes",
              writes(f"{EXPORT}/_index.md", lambda: "---\ntitle: [unclosed\n")),
        check("front-matter-a-list", "_index.md's front matter is a list",
              writes(f"{EXPORT}/_index.md", lambda: "---\n- a\n- b\n---\n")),
        check("front-matter-billion-laughs", "_index.md's front matter: nine levels of YAML aliases (9^9 nodes)",
              writes(f"{EXPORT}/_index.md", lambda: BILLION_LAUGHS)),
        check("front-matter-deep", "_index.md's front matter nested 10,000 deep",
              writes(f"{EXPORT}/_index.md", lambda: "---\na: " + "[" * 10_000 + "]" * 10_000 + "\n---\n")),
        check("invalid-utf8", "a page of invalid UTF-8",
              writes(f"{EXPORT}/01-page.md", lambda: b"---\n\xff\xfe\n---\n")),
        check("page-fifo", "a page that is a FIFO", fifo(f"{EXPORT}/01-page.md")),
        check("page-directory", "a page that is a directory", directory(f"{EXPORT}/01-page.md")),
        check("page-without-front-matter", "a page without front matter",
              writes(f"{EXPORT}/01-page.md", lambda: "Just prose.\n")),
        check("page-over-16-mib", "a page of 16 MiB of NUL bytes", sparse(f"{EXPORT}/01-page.md", 16 << 20)),
        check("empty-directory", "an empty directory", directory("empty"), target="{tmp}/empty"),
        check("missing", "a directory that does not exist", target="{tmp}/nowhere"),
        check("a-file", "a file", writes("afile", lambda: MINE), target="{tmp}/afile"),
    ]


def notebooks_cases() -> list[Case]:
    nb = ("notebooks", "--notebooks-dir", "{tmp}/nb")
    mine = writes("nb/01-my-analysis.ipynb", lambda: USER_NOTEBOOK)

    def case(name: str, argv, expect, setup, check=None, accepted=frozenset({0}), note="") -> Case:
        return Case(f"notebooks/{name}", "notebooks", argv, expect, project=(), setup=setup, watch=("nb", "w"),
                    check=check, accepted=accepted, note=note)
    return [
        case("users-notebook", nb, ACCEPT, mine, unchanged("nb/01-my-analysis.ipynb", USER_NOTEBOOK),
             note="the directory holds a user's own 01-my-analysis.ipynb"),
        case("users-notebook-check", (*nb, "--check"), REFUSE, mine, note="--check: a user's notebook, none of ours"),
        case("dir-is-a-file", ("notebooks", "--notebooks-dir", "{tmp}/w/nb"), REFUSE, writes("w/nb", lambda: MINE),
             note="--notebooks-dir names a file"),
        case("dir-is-a-fifo", ("notebooks", "--notebooks-dir", "{tmp}/w/nb"), REFUSE, fifo("w/nb"),
             note="--notebooks-dir names a FIFO"),
        case("numbered-fifo", nb, ACCEPT, fifo("nb/77-pipe.ipynb"), accepted=frozenset({0, 2}),
             note="a FIFO named like a notebook: left alone or refused, never read"),
        case("numbered-directory", nb, ACCEPT, directory("nb/88-dir.ipynb"), accepted=frozenset({0, 2}),
             note="a directory named like a notebook: left alone or refused"),
        case("step-notebook-is-a-directory", nb, REFUSE, directory("nb/02-baseline.ipynb"),
             note="a directory where a step's notebook goes"),
        case("numbered-symlink-out", nb, ACCEPT, all_of(writes("w/mine.ipynb", lambda: USER_NOTEBOOK),
                                                         lambda tmp: _link(tmp, "nb/99-link.ipynb", "w/mine.ipynb")),
             unchanged("w/mine.ipynb", USER_NOTEBOOK), note="a numbered symbolic link to a notebook elsewhere"),
    ]


def _link(tmp: Path, rel: str, target: str) -> None:
    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp / rel).symlink_to(tmp / target)


FOREIGN = ("content/mine.md", "static/charts/mine.svg", "data/steps/mine.json", "layouts/mine.html", "mine.txt")


def _foreign(root: str) -> object:
    return all_of(*(writes(f"{root}/{rel}", lambda: MINE) for rel in FOREIGN))


def _foreign_kept(root: str):
    def check(tmp: Path, stdout: str) -> str | None:
        gone = [rel for rel in FOREIGN if not (tmp / root / rel).is_file()]
        return f"foreign files removed from the site directory: {', '.join(gone)}" if gone else None
    return check


def build_cases() -> list[Case]:
    site = ("build", "--site-dir", "{tmp}/site", "--steps", "baseline")
    published = ("site/content", "site/data", "site/static", "site/public", "site/layouts")

    def case(name: str, argv, setup=None, check=None, watch=published, note="", runs=RUNS) -> Case:
        return Case(f"build/{name}", "build", argv, REFUSE, project=runs, setup=setup, check=check,
                    watch=watch, note=note)
    foreign_dest = all_of(writes("elsewhere/report.docx", lambda: MINE))
    return [
        case("site-dir-foreign-files", (*site, "--no-hugo"), _foreign("site"), _foreign_kept("site"),
             note="--site-dir holds foreign files in content/, static/charts/, data/steps/, layouts/"),
        case("site-dir-foreign-public", ("build", "--site-dir", "{tmp}/site"), writes("site/public/mine.html",
                                                                                      lambda: MINE),
             unchanged("site/public/mine.html", MINE), runs=ALL_RUNS,
             note="--site-dir's public/ holds a foreign file; the whole build (every run: about 20 s)"),
        case("site-dir-a-file", ("build", "--site-dir", "{tmp}/site", "--steps", "baseline"),
             writes("site", lambda: MINE), note="--site-dir is a file"),
        case("site-dir-in-content", ("build", "--site-dir", "{tmp}/project/content/site", "--steps", "baseline"),
             note="--site-dir inside the project's content/"),
        case("site-dir-in-runs", ("build", "--site-dir", "{tmp}/project/runs/site", "--steps", "baseline"),
             note="--site-dir inside the runs"),
        case("destination-content", (*site, "--destination", "{tmp}/project/content"),
             note="--destination is the project's content/"),
        case("destination-project", (*site, "--destination", "{tmp}/project"), note="--destination is the project"),
        case("destination-runs", (*site, "--destination", "{tmp}/project/runs"), note="--destination is runs/"),
        case("destination-foreign", (*site, "--destination", "{tmp}/elsewhere"), foreign_dest,
             unchanged("elsewhere/report.docx", MINE), watch=(*published, "elsewhere"),
             note="--destination holds someone's files"),
        case("destination-a-file", (*site, "--destination", "{tmp}/elsewhere"), writes("elsewhere", lambda: MINE),
             note="--destination is a file"),
        case("steps-empty", ("build", "--site-dir", "{tmp}/site", "--steps", ""), note="--steps ''"),
        case("steps-commas", ("build", "--site-dir", "{tmp}/site", "--steps", ",,"), note="--steps ,,"),
        case("steps-unknown", ("build", "--site-dir", "{tmp}/site", "--steps", "tls"), note="--steps tls"),
        case("runs-damaged", (*site, "--runs-dir", "{tmp}/runs"),
             all_of(lambda tmp: put(tmp, "runs/reference-aws-c8g/run.json", "{not json")),
             note="--runs-dir holds a run whose run.json is not JSON"),
        case("runs-empty", (*site, "--runs-dir", "{tmp}/runs"), directory("runs"), note="--runs-dir is empty"),
    ]


def lab_cases() -> list[Case]:
    status = ("lab", "status", "--dir", "{tmp}/lab", "--prefix", "tpcensus")

    def case(name: str, setup, expect=REFUSE, note="") -> Case:
        return Case(f"lab/{name}", "lab", status, expect, project=(), setup=setup, watch=("lab",),
                    accepted=frozenset({0, 1}), note=note)
    state = "lab/state.json"
    return [
        case("state-fifo", fifo(state), note="state.json is a FIFO"),
        case("state-directory", directory(state), note="state.json is a directory"),
        case("state-invalid-json", writes(state, lambda: "{not json"), note="state.json is not JSON"),
        case("state-a-list", writes(state, lambda: "[1, 2]"), note="state.json is a list"),
        case("state-wrong-types", writes(state, lambda: '{"prefix": 5, "hosts": "x"}'), note="state.json: wrong types"),
        case("state-nested-100000-deep", writes(state, lambda: "[" * 100_000 + "]" * 100_000),
             note="state.json nested 100,000 deep"),
        case("state-invalid-utf8", writes(state, lambda: b'{"prefix": "\xff"}'), note="state.json: invalid UTF-8"),
        case("state-over-16-mib", sparse(state, (16 << 20) + 1), note="state.json: 16 MiB of NUL bytes"),
        case("empty-dir", directory("lab"), ACCEPT, note="an empty lab directory: not up (exit 1)"),
        case("hosts-fifo", fifo("lab/hosts.toml"), ACCEPT, note="no state, hosts.toml a FIFO: not up, no hang"),
    ]


def cases() -> list[Case]:
    return export_cases() + notebooks_cases() + build_cases() + lab_cases()
