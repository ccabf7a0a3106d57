"""Live mode with real parts: OpenSSH on loopback, Fabric, Tomcat 11, wrk on this machine.

Nothing here is mocked: a real sshd with throwaway keys, the real Tomcat tarball (fetched
by scripts/bootstrap --system), the real load generator. The runs use the smoke profile.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, unavailable
from sshd import SSHD, free_port, keygen, start_sshd
from tunepath.versions import TOMCAT_VERSION
from tunepath.errors import TunepathError
from tunepath.steps import REGISTRY
from tunepath.live.hosts import HostKeyError, LocalHost, connect, load_inventory
from tunepath.live.session import LiveOptions
from tunepath.live.runner import run_path
from tunepath.evidence.store import FACT_KEYS, RunStore
from tunepath.steps import plan
from tunepath.publish.sitedir import record_site_files

pytestmark = pytest.mark.system
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


def _need_parts():
    missing = [what for what, ok in (("sshd", SSHD.exists()), ("wrk", shutil.which("wrk") or shutil.which("wrk2")),
                                     ("java", shutil.which("java")), ("Tomcat tarball", TARBALL.exists()))
               if not ok]
    if missing:
        msg = f"live tests need {', '.join(missing)} (scripts/bootstrap --system installs them)"
        unavailable(msg)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    _need_parts()
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ssh_run(sshd, tmp_path_factory):
    """One live run of setup + baseline through SSH (smoke profile)."""
    tmp = tmp_path_factory.mktemp("ssh-run")
    known = tmp / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    options = LiveOptions(hosts_file=str(sshd.inventory(known)), profile="smoke",
                          tomcat_home=str(tmp / "tc" / "apache-tomcat-11.0.10"), tomcat_tarball=str(TARBALL),
                          http_port=free_port(), mask_hosts=True)
    # Tomcat's conventional ports held by another process, as by another Tomcat on this machine: the run
    # uses its own (issue 30, item 3), else its Tomcat could not bind its shutdown port and would stop
    held = []
    for port in (8005, 8009, 8081):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        except OSError:               # held already by someone else: just as good
            s.close()
    try:
        path = run_path(options, steps=["setup", "baseline"], runs_dir=tmp / "runs", build=False)
    finally:
        for s in held:
            s.close()
    return RunStore(tmp / "runs").load(path.name), options, sshd


def test_a_run_on_its_own_http_port_uses_its_own_shutdown_and_ajp_ports(ssh_run):
    from tunepath.model.context import ports_for

    run, options, _ = ssh_run
    ctx = run.record["context"]
    assert (ctx["shutdown_port"], ctx["ajp_port"], ctx["proxy_port"]) == ports_for(options.http_port)
    assert run.record["status"] == "complete" and len(run.measurements) == 4   # while 8005 was taken


def test_live_run_over_ssh_records_measurements_and_facts(ssh_run):
    run, options, _ = ssh_run
    rec = run.record
    assert rec["kind"] == "live" and rec["status"] == "complete"
    assert rec["same_machine"] is True and "one machine" in rec["label"]
    got = [(m.step, m.variant) for m in run.measurements]
    assert got == [("setup", "smoke"), ("baseline", "stock"), ("baseline", "access-log-off"), ("baseline", "threads")]
    from tunepath.parse.wrk import parse_file

    for m in run.measurements:
        report = parse_file(m.stdout)
        assert report.requests and report.requests > 0, m
        assert m.exit_status == 0 and m.tool in ("wrk", "wrk2")
        assert f":{options.http_port}/examples/servlets/servlet/HelloWorldExample" in m.command
    entries = rec["measurements"]
    assert all(e["cpu_utilisation"]["server"]["busy"] > 0 for e in entries)
    assert all(e["nofile"] and e["tomcat_cpu_s"] is not None for e in entries)
    facts = rec["hosts"]["server"]["facts"]
    assert set(FACT_KEYS) <= set(facts)
    assert facts["tomcat_version"] == TOMCAT_VERSION and "version" in facts["java_version"]
    assert rec["hosts"]["client"]["facts"]["load_generator"]["name"] in ("wrk", "wrk2")
    assert sorted(p.name for p in (run.path / "notebooks").glob("*.ipynb")) == ["01-setup.ipynb", "02-baseline.ipynb"]
    assert not list((run.path.parent / ".inprogress").glob("*")), "side files (context, mask, kernel log) left"


def test_steps_reuse_the_context_recorded_when_the_run_started(tmp_path):
    """The host context is computed once per run: each step's session loads it, unmasked, from
    beside the run; run.json keeps the masked copy."""
    from tunepath.evidence.recorder import Masker, RunRecorder
    from tunepath.live.session import context_file, load_context, save_context
    from tunepath.model.context import HostContext

    ctx = HostContext(server_address="10.1.2.3", tomcat_home="/srv/tomcat", threads=3)
    assert load_context(tmp_path, "live-x") is None
    recorder = RunRecorder(tmp_path, {"run_id": "live-x", "context": {}}, Masker({"10.1.2.3": "server"}))
    save_context(tmp_path, "live-x", ctx, recorder)
    assert load_context(tmp_path, "live-x") == ctx                     # the real address, for the commands
    assert recorder.record["context"]["server_address"] == "server"    # the masked one, for the record
    assert context_file(tmp_path, "live-x").parent == recorder.dir.parent


def test_recorded_commands_are_the_plan(ssh_run):
    run, _, _ = ssh_run
    blocks = run.record["blocks"]
    assert any(b["block"] == "load" and b["outcome"] == "ran" for b in blocks)
    for b in blocks:
        planned = {p.id: p.text for p in plan(b["step"], run.context)}
        if b["block"] in planned:
            assert b["text"] == planned[b["block"]], b["block"]


def test_tomcat_stopped_and_server_xml_restored_after_the_run(ssh_run):
    _, options, _ = ssh_run
    home = Path(options.tomcat_home)
    assert (home / "conf" / "server.xml").read_bytes() == (home / "conf" / "server.xml.tunepath-orig").read_bytes()
    assert not (home / "temp" / "tomcat.pid").exists()
    assert subprocess.run(["pgrep", "-f", f"catalina.base={home}"], capture_output=True).returncode == 1


def test_masked_run_names_no_host_address(ssh_run):
    run, _, _ = ssh_run
    assert run.server.name == "server"
    for path in run.path.rglob("*"):
        if path.is_file():
            assert "127.0.0.1" not in path.read_text(errors="replace"), path
    assert any("http://server:" in m.command for m in run.measurements)


def test_no_secret_in_the_run(ssh_run):
    run, _, sshd = ssh_run
    key_body = [ln for ln in sshd.user_key.read_text().splitlines() if ln and "PRIVATE KEY" not in ln]
    for path in run.path.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "PRIVATE KEY" not in text, path
            assert not any(line in text for line in key_body), path


def test_changed_host_key_is_refused_and_nothing_is_written(sshd, tmp_path):
    other = keygen(tmp_path / "other")
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(Path(f"{other}.pub")))
    options = LiveOptions(hosts_file=str(sshd.inventory(known, tmp_path / "hosts.toml")), profile="smoke",
                          tomcat_home=str(tmp_path / "tc"), tomcat_tarball=str(TARBALL))
    with pytest.raises(HostKeyError, match=r"host key differs .* Nothing was run"):
        run_path(options, steps=["baseline"], runs_dir=tmp_path / "runs", build=False)
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []
    assert not (tmp_path / "tc").exists()


def test_unknown_host_is_refused_unless_trusted(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    inventory = load_inventory(sshd.inventory(known, tmp_path / "hosts.toml"))
    with pytest.raises(HostKeyError, match="host key unknown"):
        connect(inventory.server, inventory)
    with connect(inventory.server, inventory, trust_new_hosts=True) as host:
        assert host.run("echo ok").stdout.strip() == "ok"
    assert known.read_text().strip().endswith(sshd.host_pub.read_text().split()[1])
    with connect(inventory.server, inventory) as host:       # now known: no option needed
        assert host.run("true").ok


def test_remote_command_outliving_its_timeout_is_ended_on_the_host(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    inventory = load_inventory(sshd.inventory(known, tmp_path / "hosts.toml"))
    marker = f"tunepath-timeout-{os.getpid()}"
    with connect(inventory.server, inventory) as host:
        result = host.run(f"exec -a {marker} sleep 60", timeout=2, check=False)
    assert result.timed_out or result.exited == 124
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1


def test_ctrl_c_ends_the_remote_command_at_once_on_its_host(sshd, tmp_path):
    """Without a terminal, Fabric would wait for the command's end (a measurement's whole duration)
    before a step's guard could put the server back, and the command would go on after it."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    inventory = load_inventory(sshd.inventory(known, tmp_path / "hosts.toml"))
    marker, landed = f"tunepath-ctrl-c-{os.getpid()}", tmp_path / "landed"
    main = threading.get_ident()
    with connect(inventory.server, inventory) as host:
        threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            host.run(f"(exec -a {marker} sleep 30); echo landed > {landed}", timeout=60)
        took = time.monotonic() - t0
        assert host.run("echo still usable").stdout.strip() == "still usable"
    assert took < 15                  # not the command's 30 s: it was ended, not waited for
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1
    assert not landed.exists()


def test_two_runs_side_by_side_on_one_machine_both_complete(tmp_path):
    """Issue 30, item 3: two smoke runs at once on this machine, each with its own account home
    (its own lock) and HTTP port, in one runs directory: their Tomcats take ports of their own
    (HTTP, shutdown, AJP), their records never mix (two runs that start in the same second get two
    ids), and both complete."""
    _need_parts()
    runs, procs = tmp_path / "runs", []
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        procs.append(subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "tunepath"), "run", "--steps", "setup,baseline", "--profile", "smoke",
             "--tomcat-home", str(home / "apache-tomcat-11.0.10"), "--tomcat-tarball", str(TARBALL),
             "--http-port", str(free_port()), "--runs-dir", str(runs), "--no-build"],
            env={**os.environ, "HOME": str(home)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    recorded = sorted(d for d in runs.iterdir() if d.is_dir() and not d.name.startswith("."))
    assert len(recorded) == 2
    records = [json.loads((d / "run.json").read_text()) for d in recorded]
    assert [r["status"] for r in records] == ["complete", "complete"]
    ports = [(r["context"]["port"], r["context"]["shutdown_port"], r["context"]["ajp_port"]) for r in records]
    assert len(set(ports[0]) | set(ports[1])) == 6, ports      # six distinct ports: nothing shared
    assert all(r["measurements"] for r in records)


def test_sigint_during_measurement_restores_and_keeps_published_data(tmp_path):
    _need_parts()
    home = tmp_path / "tc" / "apache-tomcat-11.0.10"
    site = tmp_path / "site"
    (site / "data" / "steps").mkdir(parents=True)
    (site / "data" / "steps" / "baseline.json").write_text('{"published": true}\n')
    record_site_files(site)                     # an earlier build's site directory, as a build marks it
    before = hashlib.sha256((site / "data" / "steps" / "baseline.json").read_bytes()).hexdigest()
    runs = tmp_path / "runs"
    port = free_port()
    pidfiles = set(glob.glob(os.path.expanduser("~/.tunepath/load-*.pid")))
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "tunepath"), "run", "--steps", "baseline",
                             "--profile", "smoke", "--tomcat-home", str(home), "--tomcat-tarball", str(TARBALL),
                             "--http-port", str(port), "--runs-dir", str(runs), "--site-dir", str(site)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:           # wait until a measurement is running
        if set(glob.glob(os.path.expanduser("~/.tunepath/load-*.pid"))) - pidfiles:
            break
        if proc.poll() is not None:
            pytest.fail(f"run ended before the measurement: {proc.stdout.read()}")
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("no measurement started within 180 s")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert (home / "conf" / "server.xml").read_bytes() == (home / "conf" / "server.xml.tunepath-orig").read_bytes()
    assert subprocess.run(["pgrep", "-f", f"catalina.base={home}"], capture_output=True).returncode == 1
    assert subprocess.run(["pgrep", "-f", f"127.0.0.1:{port}/"], capture_output=True).returncode == 1
    assert hashlib.sha256((site / "data" / "steps" / "baseline.json").read_bytes()).hexdigest() == before
    assert not (site / "public").exists()
    [run_dir] = [p for p in runs.iterdir() if p.name.startswith("live-")]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and record["error"]["message"] == "interrupted"
    assert not Path(os.path.expanduser("~/.tunepath/lock")).exists()


def test_failed_step_is_recorded_with_host_and_command(tmp_path):
    _need_parts()
    home = tmp_path / "no-tomcat"
    with pytest.raises(TunepathError, match="recorded as failed") as info:
        run_path(LiveOptions(profile="smoke", tomcat_home=str(home)), steps=["baseline"],
                 runs_dir=tmp_path / "runs", build=False)
    assert "Tomcat is not installed" in str(info.value)
    [run_dir] = list((tmp_path / "runs").iterdir())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and record["error"]["step"] == "baseline"
    assert "Tomcat is not installed" in record["error"]["message"]
    assert (run_dir / "notebooks" / "02-baseline.ipynb").is_file()
    assert RunStore(tmp_path / "runs").load(run_dir.name).record["status"] == "failed"


@pytest.fixture(scope="module")
def two_client_run(sshd, tmp_path_factory):
    """Two clients (both reached over SSH on this machine) driving one Tomcat at once, with two
    interleaved repetitions of each baseline configuration (smoke profile)."""
    tmp = tmp_path_factory.mktemp("two-clients")
    known = tmp / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    inventory = sshd.inventory(known, tmp / "hosts.toml")
    text = inventory.read_text()
    client = text.split("[[clients]]\n", 1)[1]
    inventory.write_text(text + "\n[[clients]]\n" + client)
    options = LiveOptions(hosts_file=str(inventory), profile="smoke", repetitions=2, max_repetitions=2,
                          tomcat_home=str(tmp / "tc" / "apache-tomcat-11.0.10"), tomcat_tarball=str(TARBALL),
                          http_port=free_port())
    path = run_path(options, steps=["setup", "baseline"], runs_dir=tmp / "runs", build=False)
    return RunStore(tmp / "runs").load(path.name)


def test_repetitions_are_interleaved_and_stop_at_the_maximum(two_client_run):
    run = two_client_run
    baseline = [(m.variant, m.repetition) for m in run.measurements if m.step == "baseline"]
    assert baseline == [("stock", 1), ("access-log-off", 1), ("threads", 1),
                        ("stock", 2), ("access-log-off", 2), ("threads", 2)]      # A B C A B C
    info = run.record["repetitions"]["baseline"]
    assert info["rounds"] == 2 and "maximum of 2" in info["reason"]
    assert run.record["step_timings"]["baseline"]["wall_s"] > 0


def test_every_client_drives_the_load_and_results_are_summed(two_client_run):
    from tunepath.parse.wrk import parse_file
    from tunepath.analysis.frames import measurements_frame

    run = two_client_run
    m = run.measurement("baseline", "stock", 2)
    assert len(m.parts) == 2 and all(p.is_file() for _, p in m.parts)
    reports = [parse_file(p) for _, p in m.parts]
    assert all(r.requests > 0 for r in reports)          # both clients really sent requests
    frame = measurements_frame([run], REGISTRY)
    row = frame[(frame.step == "baseline") & (frame.variant == "stock")].iloc[0]
    # a repetition disturbed from outside (foreign load on a busy machine) is left out of the row
    kept = [r["repetition"] for r in row["repetitions"] if not r["dropped"]]
    assert kept and row["n"] == len(kept) and row["n"] + row["dropped"] == 2
    per_rep = [sum(parse_file(p).requests_per_sec for _, p in run.measurement("baseline", "stock", r).parts)
               for r in kept]
    assert row["requests_per_sec"] == pytest.approx(sorted(per_rep)[0] if len(kept) == 1 else sum(per_rep) / 2)
    assert sorted(c["repetition"] for c in row["clients"]) == sorted(kept * 2)   # each client, per repetition
    assert len({c["raw"] for c in row["clients"]}) == 2 * len(kept)            # from its own raw output
    flags = [f for f in row["flags"] if f.host in {n for n, _ in m.parts}]
    assert all(f.text.startswith("client ") for f in flags)   # per-client checks name their client
    assert row["latency_merge"]["method"] == "bounds"     # Debian wrk prints no spectrum: a bound, not a merge
    live = run.measurement("baseline", "stock", 2).live
    assert live.client_cpu_s == pytest.approx(sum(p.client_cpu_s for p in live.parts))


def test_an_interrupted_step_is_recorded_as_interrupted(monkeypatch, tmp_path):
    """The runner ends a step's kernel with SIGINT when it is interrupted; whichever of the two
    records the failure first, the run says "interrupted" (not "KeyboardInterrupt")."""
    from types import SimpleNamespace

    from tunepath.live import actions
    from tunepath.live.session import side_file

    failed, record, quick = [], {"blocks": [{"step": "nic-queues", "block": "set-queues", "outcome": "ran"}]}, []
    monkeypatch.setattr(actions, "cleanup", lambda *a, quick=False, calls=quick: calls.append(quick))
    monkeypatch.setattr(actions, "restore_hosts", lambda server, clients: ["eth0: combined 4 queues again"])
    monkeypatch.setattr(actions, "answers", lambda host: True)
    session = SimpleNamespace(server=None, tomcat=None, clients=[], run_id="r", options=SimpleNamespace(apply=True),
                              recorder=SimpleNamespace(runs_dir=tmp_path,
                                                       fail=lambda step, message, **kw: failed.append((step, message)),
                                                       note_put_back=lambda lines, when, steps: record.setdefault(
                                                           "notes", []).append({"text": f"{when}: " + "; ".join(lines),
                                                                                "steps": steps})))
    with pytest.raises(KeyboardInterrupt):
        with actions.step_guard(session, "baseline"):
            raise KeyboardInterrupt
    # a Ctrl-C: Tomcat is given half a second, and the runner is told the server is back in full
    settled = side_file(tmp_path, "r", ".put-back.json")
    assert quick == [True] and json.loads(settled.read_text()) == {"step": "baseline"}
    settled.unlink()
    with pytest.raises(TunepathError):
        with actions.step_guard(session, "numa"):
            raise TunepathError("numactl is missing")
    assert quick == [True, False] and not settled.exists()     # a failure: the runner puts it back again
    assert failed == [("baseline", "interrupted"), ("numa", "numactl is missing")]
    # what the guard put back is noted in the run (issue 30, item 4), on the page of the step that changed it
    notes = [n["text"] for n in record["notes"]]
    assert notes[0].startswith("When baseline was interrupted: Tomcat and the load stopped")
    assert notes[1].startswith("When numa failed: ") and all("eth0: combined 4 queues again" in n for n in notes)
    assert [n["steps"] for n in record["notes"]] == [["baseline"], ["numa"]]


def test_a_step_interrupted_while_its_server_is_down_leaves_the_server_to_the_run(monkeypatch, tmp_path):
    """A Ctrl-C during the reboot wait finds the server down: the guard stops the clients' load,
    runs no command on the server (each would wait for it), and leaves the put-back to the run's
    clean-up, which waits for the boot (no mark that the server is back)."""
    from types import SimpleNamespace

    from tunepath.live import actions
    from tunepath.live.putback import BOOT_WAIT_S, RECONNECT_S, patience
    from tunepath.live.session import side_file

    calls, notes = [], []
    monkeypatch.setattr(actions, "answers", lambda host: False)
    monkeypatch.setattr(actions, "cleanup", lambda *a, **kw: calls.append("cleanup"))
    monkeypatch.setattr(actions, "restore_hosts", lambda server, clients: calls.append("restore") or [])
    monkeypatch.setattr(actions, "cleanup_clients", lambda clients, run_id: calls.append("clients"))
    session = SimpleNamespace(server=None, tomcat=None, clients=[], run_id="r", options=SimpleNamespace(apply=True),
                              recorder=SimpleNamespace(runs_dir=tmp_path, fail=lambda *a, **kw: None,
                                                       note_put_back=lambda lines, when, steps: notes.append(lines)))
    with pytest.raises(KeyboardInterrupt):
        with actions.step_guard(session, "iommu"):
            raise KeyboardInterrupt
    assert calls == ["clients"] and not side_file(tmp_path, "r", ".put-back.json").exists()
    assert "does not answer" in notes[0][0]
    assert patience(SimpleNamespace(allow_reboot=True)) == BOOT_WAIT_S > patience(SimpleNamespace(allow_reboot=False)) == RECONNECT_S


def test_a_put_back_is_noted_on_the_pages_it_concerns(tmp_path):
    from tunepath.evidence.recorder import RunRecorder

    recorder = RunRecorder.__new__(RunRecorder)
    recorder.record, recorder.mask, recorder.save = {}, (lambda x: x), (lambda: None)
    recorder.note_put_back([], "When the run ended")
    assert "notes" not in recorder.record                        # nothing put back: no note
    recorder.note_put_back(["eth0: combined 4 queues again"], "When numa failed", ["numa"])
    assert recorder.record["notes"] == [{"text": "When numa failed, the hosts were put back as the run found them: "
                                                 "eth0: combined 4 queues again.", "steps": ["numa"]}]


def test_tunepath_restore_notes_what_it_did_in_the_run_that_held_the_lock(tmp_path):
    """Issue 30, item 4: `tunepath restore` after a run died notes in that run's record what it
    put back, with host names masked; a run recorded elsewhere is named, not guessed."""
    from tunepath.live.runner import note_in_dead_run

    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[server]\nhost = "127.0.0.1"\nport = 2222\nuser = "srvuser"\n\n'
                     '[[clients]]\nhost = "127.0.0.1"\nport = 2223\nuser = "cliuser"\n')
    options = LiveOptions(hosts_file=str(hosts))
    dead = tmp_path / "runs" / ".inprogress" / "live-x"
    dead.mkdir(parents=True)
    (dead / "run.json").write_text(json.dumps({"run_id": "live-x", "status": "partial", "blocks": [
        {"step": "nic-queues", "block": "set-queues", "outcome": "ran"}]}))
    lines = ["eth0: combined 4 queues again on srvuser@127.0.0.1:2222 (`ethtool -L eth0 combined 4`)",
             "the lock of the dead run removed"]
    where = note_in_dead_run(tmp_path / "runs", "live-x", options, lines)
    assert where.startswith("noted in run live-x")
    note = json.loads((dead / "run.json").read_text())["notes"][0]
    assert note["text"].startswith("When `tunepath restore` ran after the run had ended, the hosts were put back")
    assert "ethtool -L eth0 combined 4" in note["text"] and "srvuser" not in note["text"]
    assert note["steps"] == ["nic-queues"]
    assert "not in" in note_in_dead_run(tmp_path / "runs", "live-other", options, lines)
