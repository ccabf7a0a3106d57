"""The step registry is the one source of a step's place: pages, notebooks and the built site
follow it, and adding a step takes one step module, one line in ORDER and one page."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LP_PATH, ROOT
from tunepath.publish.notebooks import check_all, render
from tunepath.steps import ORDER, REGISTRY, STEPS, Registry, get_step, load
from tunepath.steps.base import Step
from tunepath.errors import TunepathError

pytestmark = pytest.mark.fast

PAGES = ROOT / "content" / LP_PATH


def _front_matter(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    block = text.split("---", 2)[1]
    return {k.strip(): v.strip().strip('"') for k, _, v in (ln.partition(":") for ln in block.splitlines()) if v}


def test_numbers_come_from_the_order_alone():
    assert [s.number for s in STEPS] == list(range(1, len(ORDER) + 1))
    assert [s.notebook for s in STEPS][:2] == ["01-setup.ipynb", "02-baseline.ipynb"]
    assert REGISTRY.sequence[0] == ("baseline", "stock")


def test_each_step_has_one_page_and_no_page_carries_a_position():
    pages = {p: _front_matter(p) for p in PAGES.glob("*.md") if p.name != "_index.md"}
    by_step = {}
    for path, meta in pages.items():
        assert "weight" not in meta, f"{path.name}: its place comes from the step registry, not `weight:`"
        assert not re.match(r"^\d", path.name), f"{path.name}: page names carry no number"
        if meta.get("extra") == "true":     # a page that is no step (the method page): no step, last in the nav
            assert "step" not in meta, f"{path.name}: an extra page has no step"
            continue
        assert meta.get("step") in REGISTRY.names, f"{path.name}: step {meta.get('step')!r} is no registered step"
        by_step.setdefault(meta["step"], []).append(path.name)
    assert {s.name: [f"{s.page}.md"] for s in STEPS} == by_step


def test_committed_notebooks_are_the_templates_rendering():
    assert check_all(ROOT / "notebooks", REGISTRY) == []
    nb = json.loads(render(get_step("rate-sweep")))
    params = "".join(nb["cells"][1]["source"])
    assert nb["cells"][1]["metadata"]["tags"] == ["parameters"] and "slo_ms = 10.0" in params
    assert not any("not available yet" in "".join(c["source"]) for s in STEPS for c in json.loads(render(s))["cells"])


def test_a_stale_or_foreign_notebook_is_reported(tmp_path):
    from tunepath.publish.notebooks import write_all

    write_all(tmp_path, REGISTRY)
    (tmp_path / "99-gone.ipynb").write_text(render(get_step("baseline")))    # one this command generated (its mark)
    (tmp_path / "02-baseline.ipynb").write_text("{}")
    problems = check_all(tmp_path, REGISTRY)
    assert any("99-gone.ipynb belongs to no step" in p for p in problems)
    assert any("02-baseline.ipynb differs" in p for p in problems)
    assert "removed 99-gone.ipynb (no step owns it)" in write_all(tmp_path, REGISTRY)
    assert check_all(tmp_path, REGISTRY) == []


def test_registry_refuses_two_steps_of_one_name_and_unknown_kinds():
    class Twin(Step):
        name = "baseline"

    with pytest.raises(TunepathError, match="share the name baseline"):
        Registry([get_step("baseline"), Twin()])
    with pytest.raises(TunepathError, match="unknown step 'nope'"):
        get_step("nope")
    with pytest.raises(Exception, match="defines no STEP"):
        load(("base",))


TOY_MODULE = '''"""Step: keep-alive limits (a toy step added by tests/test_steps_registry.py)."""

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import connector_xml, load_blocks, restart

LIMITS = {"ka-100": "100", "ka-10000": "10000"}


class KeepAlive(Step):
    name = "keepalive"
    title = "Keep-alive: how many requests a connection may carry"
    why = "Compares maxKeepAliveRequests of 100 (Tomcat's default) with 10000."
    variants = tuple(Variant(v, f"maxKeepAliveRequests {n}", f"maxKeepAliveRequests={n}") for v, n in LIMITS.items())

    def config(self, variant, ctx):
        return TomcatConfig(access_log=False, connector={"maxKeepAliveRequests": LIMITS[variant]})

    def plan(self, ctx):
        return [*(Block(f"connector-{v}", "server", f"maxKeepAliveRequests {n}",
                        connector_xml({"maxKeepAliveRequests": n}), lang="xml", variant=v) for v, n in LIMITS.items()),
                restart(ctx), *load_blocks(ctx)]


STEP = KeepAlive()
'''
TOY_PAGE = '''---
title: "Keep-alive limits"
layout: learningpathall
step: keepalive
---

## What this step measures

The connector closes a connection after `maxKeepAliveRequests` requests.

{{< commands step="keepalive" block="connector-ka-10000" >}}

With 10000 requests per connection the run reached {{< value step="keepalive" run="toy-run" variant="ka-10000" field="requests_per_sec" >}} requests per second.

{{< results step="keepalive" >}}

{{< charts step="keepalive" >}}

{{< notebook step="keepalive" >}}
'''


def _toy_run(runs: Path) -> None:
    """A recorded run of the toy step: two real wrk2 reports of the reference run, relabelled."""
    src = json.loads((runs / "reference-aws-c8g" / "run.json").read_text())
    run = runs / "toy-run"
    (run / "raw").mkdir(parents=True)
    measurements = []
    for variant, raw in (("ka-100", "baseline-stock.txt"), ("ka-10000", "baseline-access-log-off.txt")):
        shutil.copy(runs / "reference-aws-c8g" / "raw" / raw, run / "raw" / f"keepalive-{variant}.txt")
        measurements.append({"step": "keepalive", "variant": variant, "stdout": f"raw/keepalive-{variant}.txt",
                             "command": src["measurements"][1]["command"], "tool": "wrk2"})
    record = {k: src[k] for k in ("kind", "status", "date", "date_note", "same_machine", "hosts", "context")}
    record.update(run_id="toy-run", label="toy run (reference outputs relabelled by a test)", source="a test",
                  notes=[], measurements=measurements, verification=[], skipped=[])
    (run / "run.json").write_text(json.dumps(record, indent=2))


@pytest.mark.docs
def test_a_toy_step_is_one_module_one_order_line_and_one_page(tmp_path):
    """Add a step after the proxy step in a copy of the project: the build renders its page
    between the proxy and the thread sweep, and every later step moves down one."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("config.toml", "content", "layouts", "static", "notebooks", "runs"):
        src = ROOT / name
        (shutil.copytree(src, project / name, ignore=shutil.ignore_patterns("charts", "notebooks")
                         if name == "static" else None) if src.is_dir() else shutil.copy(src, project / name))
    shutil.copytree(ROOT / "scripts" / "tunepath", project / "scripts" / "tunepath",
                    ignore=shutil.ignore_patterns("__pycache__"))
    steps = project / "scripts" / "tunepath" / "steps"
    (steps / "keepalive.py").write_text(TOY_MODULE)                                       # 1. the step module
    init = (steps / "__init__.py").read_text()
    (steps / "__init__.py").write_text(init.replace('"proxy",', '"proxy", "keepalive",', 1))  # 2. its place
    (project / "content" / LP_PATH / "keepalive.md").write_text(TOY_PAGE)                 # 3. its page
    _toy_run(project / "runs")
    env = {**os.environ, "PYTHONPATH": str(project / "scripts"), "TUNEPATH_PROJECT": str(project)}
    cli = [sys.executable, "-m", "tunepath.cli"]
    notebooks = subprocess.run([*cli, "notebooks"], cwd=project, env=env, capture_output=True, text=True)
    assert notebooks.returncode == 0, notebooks.stderr
    proxy, last = REGISTRY.get("proxy").number, len(REGISTRY)     # the toy comes after the proxy
    toy = f"{proxy + 1:02d}-keepalive"
    assert f"wrote {toy}.ipynb" in notebooks.stdout
    assert f"removed {last:02d}-{REGISTRY.steps[-1].name}.ipynb (no step owns it)" in notebooks.stdout
    build = subprocess.run([*cli, "build", "--no-cache"], cwd=project, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    html = (project / "public" / LP_PATH / "keepalive" / "index.html").read_text()
    assert "maxKeepAliveRequests=&#34;10000&#34;" in html or 'maxKeepAliveRequests="10000"' in html
    assert "toy-run" in html and (project / "static" / "notebooks" / f"{toy}.html").is_file()
    nav = re.findall(r'lp-nav-num">([^<]+)</span>\s*<span class="lp-nav-text">([^<]+)<', html)
    assert (str(proxy + 1), "Keep-alive limits") in nav and nav[-2][0] == str(last + 1) and nav[-1][0] == "·", nav
    order = json.loads((project / "data" / "path.json").read_text())["steps"]
    assert [s["name"] for s in order][proxy - 1:proxy + 2] == ["proxy", "keepalive", "thread-sweep"]
