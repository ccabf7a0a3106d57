"""A step's notebook replays in JupyterLab itself, as a reader would run it: Debian's Chromium
(the one the other browser tests use, driven by Playwright) opens ``02-baseline.ipynb`` in a real
JupyterLab from ``.venv``, runs all cells from the Run menu, and the notebook shows the step's
table (a pandas DataFrame with a ``variant`` column and a ``stock`` row) and at least one SVG
chart, with no error, warning or traceback output anywhere.

JupyterLab serves a temporary copy of the parts of the project a replay needs (``config.toml``,
``notebooks/``, ``runs/``), with ``TUNEPATH_PROJECT`` pointing at that copy, so the replay's
``data/steps/baseline.json`` and ``static/charts/*.svg`` land in the copy and the work tree's
published files stay as they were. The server is stopped by its process group when the module
ends, whatever happened.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ARTIFACTS, ROOT, unavailable
from test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.docs

NOTEBOOK = "02-baseline.ipynb"
STEP = "baseline"
TOKEN = "tunepath-test-" + os.urandom(8).hex()
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/lab")
PYTHON = ROOT / ".venv" / "bin" / "python"
SCREENSHOT = ARTIFACTS / "screenshots" / "jupyterlab-baseline.png"
START_S = 180           # JupyterLab printing its URL
READY_MS = 90_000       # the notebook panel and its kernel
RUN_MS = 180_000        # Run All Cells: the kernel imports pandas and matplotlib, then replays every run
TIMEOUT_MS = 15_000     # any other single browser action

# --------------------------------------------------------------------------- selectors
# Checked against JupyterLab 4.6's DOM. Only the panel of the notebook we opened counts: Lumino
# hides the other dock panels with lm-mod-hidden.
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# The notebook toolbar's kernel indicator; data-status is the kernel's status ("idle", "busy", ...).
KERNEL_IDLE = '.jp-Notebook-ExecutionIndicator[data-status="idle"]'
# The toolbar's kernel name: "No Kernel" until the session has its kernel.
KERNEL_NAME = ".jp-KernelName"
# A code cell's prompt: "[ ]:" never run, "[*]:" queued or running, "[7]:" run.
PROMPT = ".jp-CodeCell .jp-InputPrompt"
OUTPUT = ".jp-OutputArea-output"
# pandas' DataFrame._repr_html_, rendered as trusted HTML; the step's table is the output of the
# code cell that calls pipeline.table (the noise-flags table has a variant column too).
TABLE = f'{OUTPUT}[data-mime-type="text/html"] table.dataframe'
TABLE_CALL = "pipeline.table("
# IPython's SVG(...): JupyterLab renders image/svg+xml as an <img> with a data: URL (an inline
# <svg> would be accepted too).
CHART = f'{OUTPUT}[data-mime-type="image/svg+xml"] img, {OUTPUT}[data-mime-type="image/svg+xml"] svg'
# JupyterLab renders all three as application/vnd.jupyter.stderr: text written to stderr, warnings
# (which go to stderr) and an exception's traceback (an "error" output, ansi-coloured).
ERROR = f'{OUTPUT}[data-mime-type="application/vnd.jupyter.stderr"]'
# A dialog JupyterLab opens on its own (kernel died, failed to start, file changed on disk, ...).
DIALOG = ".jp-Dialog"

# The kernel is ready: the indicator reads "idle" already while the toolbar says "No Kernel" (then
# initializing, connecting, unknown, idle), and Run All issued then runs nothing at all, so the
# kernel's name must be there too.
KERNEL_READY = """
([panel, idle, name]) => {
  const root = document.querySelector(panel);
  if (!root) return false;
  const shown = root.querySelector(name);
  const kernel = shown ? shown.textContent.trim() : '';
  return !!root.querySelector(idle) && kernel !== '' && kernel !== 'No Kernel';
}
"""

# Run All has started: a cell is queued, running or run.
RUN_STARTED = """
([panel, prompt]) => [...document.querySelectorAll(`${panel} ${prompt}`)]
  .some(p => /^\\[(\\*|\\d+)\\]:$/.test(p.textContent.trim()))
"""

# Run All is done, successfully or not: nothing queued or running, the kernel idle again, and at
# least one cell numbered (the notebooks are stored without execution counts, which the test
# checks first, so this cannot hold before the run started). After an exception the cells below
# stay "[ ]:", which the assertions then report with the traceback.
RUN_FINISHED = """
([panel, idle, prompt]) => {
  const root = document.querySelector(panel);
  if (!root || !root.querySelector(idle)) return false;
  const prompts = [...root.querySelectorAll(prompt)].map(p => p.textContent.trim());
  return prompts.length > 0 && !prompts.includes('[*]:') && prompts.some(p => /^\\[\\d+\\]:$/.test(p));
}
"""


@dataclass(frozen=True)
class Lab:
    url: str            # http://127.0.0.1:PORT
    project: Path       # the temporary project JupyterLab serves and the kernel writes into
    log: Path           # the server's (and its kernels') output

    def log_tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return text[-chars:].replace(TOKEN, "<token>")


# --------------------------------------------------------------------------- fixtures

def _copy_project(dest: Path) -> Path:
    """The parts of the project a replay reads, copied to ``dest``: a project by tunepath's own
    test (config.toml and notebooks/), so that both ``runs_dir="../runs"`` / ``site_dir=".."``
    relative to notebooks/ and the project found through TUNEPATH_PROJECT mean this copy."""
    dest.mkdir()
    shutil.copy2(ROOT / "config.toml", dest / "config.toml")
    shutil.copytree(ROOT / "notebooks", dest / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    # a live run in progress elsewhere on this machine is no recorded run
    shutil.copytree(ROOT / "runs", dest / "runs", ignore=shutil.ignore_patterns(".inprogress"))
    return dest


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server and its kernels (its whole process group), politely first."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    """JupyterLab on a temporary copy of the project, started as scripts/notebook starts it.

    It is started directly from .venv rather than through scripts/notebook, because that script
    exports TUNEPATH_PROJECT as its own checkout and serves the checkout's notebooks/: a replay
    would write into the work tree (and it runs scripts/bootstrap first, which the test does not
    need: .venv is there). The options are the script's, plus --no-browser, an ephemeral port and
    no update check against PyPI (the test stays offline)."""
    if not PYTHON.exists():
        unavailable(f"{PYTHON} is missing (scripts/bootstrap creates .venv with JupyterLab)")
    if subprocess.run([str(PYTHON), "-c", "import jupyterlab, tunepath"], capture_output=True).returncode:
        unavailable(f"{PYTHON} cannot import jupyterlab and tunepath (scripts/bootstrap installs them)")
    base = tmp_path_factory.mktemp("jupyterlab")
    project = _copy_project(base / "project")
    jupyter = base / "jupyter"
    log = base / "server.log"
    env = {**os.environ, "JUPYTER_TOKEN": TOKEN, "TUNEPATH_PROJECT": str(project),
           "JUPYTER_CONFIG_DIR": str(jupyter / "config"), "JUPYTER_DATA_DIR": str(jupyter / "data"),
           "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime")}
    as_root = ["--allow-root"] if os.geteuid() == 0 else []
    command = [str(PYTHON), "-m", "jupyterlab", *as_root,
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={project / 'notebooks'}",
               "--ServerApp.allow_remote_access=False", "--MappingKernelManager.default_kernel_name=python3",
               "--no-browser", "--ServerApp.port=0",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=project,
                                start_new_session=True)
    try:
        port = None
        deadline = time.monotonic() + START_S
        while port is None and time.monotonic() < deadline:
            assert proc.poll() is None, f"JupyterLab exited ({proc.returncode}):\n{log.read_text(errors='replace')[-3000:]}"
            found = URL.search(log.read_text(errors="replace"))
            port = int(found.group(1)) if found else None
            time.sleep(0.5)
        assert port, f"JupyterLab printed no URL in {START_S} s:\n{log.read_text(errors='replace')[-3000:]}"
        yield Lab(url=f"http://127.0.0.1:{port}", project=project, log=log)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} not found (apt-get install chromium; the CI scripts install it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


# --------------------------------------------------------------------------- helpers

def _fingerprint(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """mtime and SHA-256 of each existing file, to prove the work tree was left alone."""
    return {str(p): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths if p.is_file()}


def _published_in_work_tree() -> list[Path]:
    return [ROOT / "data" / "steps" / f"{STEP}.json", *sorted((ROOT / "static" / "charts").glob(f"{STEP}-*.svg"))]


def _run_all(page, lab: Lab) -> None:
    """Open the notebook, wait for its kernel, Run ▸ Run All Cells, wait until the run is over."""
    page.goto(f"{lab.url}/lab/tree/{NOTEBOOK}?token={TOKEN}")
    panel = page.locator(PANEL)
    panel.wait_for(state="visible", timeout=READY_MS)
    page.wait_for_function(KERNEL_READY, arg=[PANEL, KERNEL_IDLE, KERNEL_NAME], timeout=READY_MS, polling=100)
    prompts = panel.locator(PROMPT)
    prompts.first.wait_for(state="attached")
    numbered = [t for t in prompts.all_text_contents() if re.fullmatch(r"\[\d+\]:", t.strip())]
    assert not numbered, f"{NOTEBOOK} is stored with execution counts {numbered}: the wait below needs none"
    # JupyterLab's own UI: the menu bar's Run menu, then its "Run All Cells" entry
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-hidden) .lm-Menu-itemLabel",
                 has_text=re.compile(r"^Run All Cells$")).click()
    page.wait_for_function(RUN_STARTED, arg=[PANEL, PROMPT], timeout=TIMEOUT_MS, polling=100)
    page.wait_for_function(RUN_FINISHED, arg=[PANEL, KERNEL_IDLE, PROMPT], timeout=RUN_MS, polling=250)


def _problems(page) -> list[str]:
    """Everything wrong with the executed notebook as the browser shows it."""
    panel = page.locator(PANEL)
    problems = []
    # textContent, not innerText: an output scrolled out of view is not rendered
    # (content-visibility), and its innerText is empty
    for error in panel.locator(ERROR).all():
        problems.append(f"error output: {(error.text_content() or '').strip()[:2000]}")
    for dialog in page.locator(DIALOG).all():
        problems.append(f"JupyterLab dialog: {(dialog.text_content() or '').strip()[:500]}")
    prompts = [t.strip() for t in panel.locator(PROMPT).all_text_contents()]
    if not prompts or not all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
        problems.append(f"not every code cell ran: prompts {prompts}")

    table_cell = panel.locator(".jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=TABLE_CALL))
    tables = table_cell.locator(TABLE)
    found_table = False
    for table in tables.all():
        headers = [h.strip() for h in table.locator("thead th").all_text_contents()]
        cells = [c.strip() for c in table.locator("tbody td").all_text_contents()]
        if "variant" in headers and "stock" in cells:
            table.scroll_into_view_if_needed()
            found_table = table.is_visible()
    if not found_table:
        problems.append(f"no visible DataFrame table with a 'variant' column and a 'stock' row in the output of "
                        f"the cell calling {TABLE_CALL}…) ({table_cell.count()} such cell(s), {tables.count()} table(s))")

    charts = panel.locator(CHART)
    sizes = []
    for chart in charts.all():
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        # an <img> that failed to decode its data: URL has no natural size
        natural = chart.evaluate("e => e.tagName.toLowerCase() !== 'img' || (e.complete && e.naturalWidth > 0)")
        sizes.append((box["width"], box["height"], natural) if box else (0, 0, natural))
    if not any(w > 0 and h > 0 and natural for w, h, natural in sizes):
        problems.append(f"no rendered SVG chart in an output area (width, height, decoded): {sizes}")
    return problems


def _state(page) -> str:
    """Where the notebook is, for a failure message: its cells' prompts and the kernel's status."""
    try:
        panel = page.locator(PANEL)
        prompts = [t.strip() for t in panel.locator(PROMPT).all_text_contents()]
        status = [i.get_attribute("data-status") for i in panel.locator(".jp-Notebook-ExecutionIndicator").all()]
        return f"state: prompts {prompts}, kernel {status}, {panel.locator(ERROR).count()} error output(s)"
    except Exception as exc:  # noqa: BLE001 - only a diagnostic
        return f"state unknown: {exc}"


# --------------------------------------------------------------------------- the test

def test_a_step_notebook_runs_all_cells_in_jupyterlab(browser, lab):   # no Chromium: skip before starting a server
    before = _fingerprint(_published_in_work_tree())
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    from playwright.sync_api import Error as PlaywrightError

    started = time.monotonic()
    try:
        try:
            _run_all(page, lab)
            problems = _problems(page)
        except (PlaywrightError, AssertionError) as exc:    # a timeout, a missing element, a precondition
            problems = [f"{type(exc).__name__}: {exc}", _state(page)]
        if problems:
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            try:
                page.screenshot(path=str(SCREENSHOT), full_page=True)
            except PlaywrightError as exc:
                problems.append(f"(no screenshot: {exc})")
            pytest.fail(f"{NOTEBOOK} in JupyterLab ({time.monotonic() - started:.0f} s), "
                        f"screenshot {SCREENSHOT}:\n- " + "\n- ".join(problems)
                        + (f"\npage errors: {page_errors}" if page_errors else "")
                        + f"\n--- server log (tail) ---\n{lab.log_tail()}")
    finally:
        context.close()

    # the copy had no data/ or static/: whatever is there now, this run wrote
    published = lab.project / "data" / "steps" / f"{STEP}.json"
    assert published.is_file(), f"the replay published nothing into the copy: {published} is missing"
    assert list((lab.project / "static" / "charts").glob(f"{STEP}-*.svg")), "no chart written into the copy"
    assert _fingerprint(_published_in_work_tree()) == before, \
        f"the test changed the work tree's published {STEP} files under {ROOT}"
