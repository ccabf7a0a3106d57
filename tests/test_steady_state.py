"""Steady-state warm-up, CPU placement and noise-aware repetitions (issue 14): the pure parts.

The live parts (windows over SSH, taskset on real processes) run in test_live and the lab tests.
"""

from __future__ import annotations

import pytest

from tunepath.analysis.noise import cpu_flags, drop_reasons, flags_for
from tunepath.analysis.steady import WarmUp, compile_pct, quiet, spread_pct, steady_at
from tunepath.live.placement import Placement, apply, decide
from tunepath.model.context import HostContext
from tunepath.parse.record import WrkReport
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast


def test_steady_needs_k_windows_in_a_row_within_the_band():
    climbing = [3000, 8000, 12000, 21000, 27000, 34000, 33500, 34200, 33900]
    assert steady_at(climbing, 3, 5) == 7            # 34000, 33500, 34200: within ±5 % of 34000
    assert steady_at(climbing, 3, 1) is None          # never within ±1 %
    assert steady_at([100, 100, None, 100, 100], 3, 5) is None   # a window without a reading breaks the run
    assert steady_at([100, 100, None, 100, 100, 101], 3, 5) == 5
    assert spread_pct([95, 100, 105]) == pytest.approx(5.0)
    with pytest.raises(ValueError):
        steady_at([1], 0, 5)


def test_warmup_record_round_trips_and_says_when_never_steady():
    w = WarmUp(3, (1000.0, 2000.0, None), 9.4, None, 3, 5.0, "wrk")
    data = w.to_dict()
    assert data["steady"] is False and data["windows_rps"] == [1000.0, 2000.0, None]
    assert WarmUp.from_dict(data) == w
    flag = [f for f in flags_for_warmup(data) if f.code == "not-steady"]
    assert flag and "±5 %" in flag[0].text
    assert not [f for f in flags_for_warmup(dict(data, steady=True, steady_after_s=9.0)) if f.code == "not-steady"]


def flags_for_warmup(warmup: dict):
    report = WrkReport(tool="wrk", requests=1000, duration_s=10.0, requests_per_sec=100.0)
    return flags_for(report, {"warmup": warmup}, tool="wrk", command="wrk -d10 http://x/", offered_rate=None,
                     server_cpus=2, client_cpus=2, same_machine=False)


def test_placement_splits_online_cpus_only_when_the_kernel_is_shared():
    assert decide([0, 1], shared=False) == Placement((), (), "the server and the clients are separate hosts")
    assert decide([0], shared=True).server_cpus == ()
    p = decide([0, 1, 2, 3, 4], shared=True)
    assert (p.server_cpus, p.client_cpus) == ((0, 1, 2), (3, 4))
    ctx = apply(HostContext(total_cpus=2, baseline_cpus=(0, 1), numa_cpus=(0, 1)), decide([0, 1], shared=True))
    assert (ctx.server_pin_cpus, ctx.client_pin_cpus, ctx.baseline_cpus, ctx.shared_kernel) == ((0,), (1,), (0,), True)
    assert ctx.nic_queues == 1
    assert HostContext.from_dict(ctx.to_dict()) == ctx


def test_pinned_commands_and_the_client_cpus_stay_online():
    ctx = apply(HostContext(total_cpus=4, baseline_cpus=(0,), numa_cpus=(0,)), decide([0, 1, 2, 3], shared=True))
    blocks = {b.id: b.text for b in REGISTRY.get("baseline").plan(ctx)}
    assert "taskset -c 0-1 " in blocks["restart-tomcat"]
    assert "taskset -c 2-3 " in blocks["load"]
    # the client's CPUs 2-3 are never taken offline; CPU 1 (neither kept nor the client's) is
    assert "{1..1}" not in blocks["offline-cpus"] and "for no in 1;" in blocks["offline-cpus"]
    unpinned = {b.id: b.text for b in REGISTRY.get("baseline").plan(HostContext())}
    assert "taskset" not in "".join(unpinned.values())
    two = apply(HostContext(total_cpus=2, baseline_cpus=(0,), numa_cpus=(0,)), decide([0, 1], shared=True))
    assert "offline-cpus" not in {b.id for b in REGISTRY.get("baseline").plan(two)}   # nothing left to offline


def test_steady_state_warm_up_block_is_one_window_of_the_closed_loop_tool():
    ctx = HostContext(warmup_s=30, warmup_window_s=3, probe_with="wrk", client_pin_cpus=(1,))
    block = next(b for b in REGISTRY.get("baseline").plan(ctx) if b.id == "warm-up")
    assert "taskset -c 1 wrk -c1280 -t128 -d3 " in block.text and "-R" not in block.text
    assert "3 s windows" in block.title and "at most 30 s" in block.title


def test_a_shared_kernel_counts_every_load_generator_as_own_cpu():
    entry = {"cpu_utilisation": {"server": {"busy": 95.0, "steal": 0.0}}, "window_s": 10.0,
             "tomcat_cpu_s": 9.5, "client_cpu_s": 9.0, "cpus_online": "0-1"}
    foreign = cpu_flags(entry, 2, 2, same_machine=False)
    assert [f.code for f in foreign] == ["foreign-load"] and drop_reasons(foreign)
    shared = dict(entry, placement={"shared_kernel": True, "server_cpus": "0", "client_cpus": "1"})
    assert cpu_flags(shared, 2, 2, same_machine=False) == []
    busy = dict(shared, cpu_utilisation={"server": {"busy": 99.0, "steal": 0.0}}, client_cpu_s=4.0)
    assert drop_reasons(cpu_flags(busy, 2, 2, same_machine=False))     # 5.3 s of 20 busy elsewhere


def test_a_plateau_while_the_jit_still_compiles_is_not_steady():
    """Issue 28: three windows within the band while the compiler threads are busy (the lab's
    saturated CPU starves them) is a plateau, not steady state; with the JIT rule, measuring
    waits until the last window compiled for at most that share of its time."""
    rates = [3300.0, 12000.0, 15300.0, 19400.0, 21500.0, 22200.0]       # a plateau at 19–22 k (lab, c64)
    busy = [90.0, 80.0, 60.0, 45.0, 40.0, 38.0]
    assert quiet(rates, busy, 3, 10, None)              # throughput alone: steady
    assert not quiet(rates, busy, 3, 10, 5)             # the JIT still compiles for 38 % of the window
    assert quiet(rates, busy[:-1] + [4.0], 3, 10, 5)
    assert not quiet(rates, busy[:-1] + [None], 3, 10, 5)   # unread counters are not quiet
    assert not quiet(rates[:2], [1.0, 1.0], 3, 10, 5)       # fewer windows than the rule's


def test_compile_share_from_two_counter_readings():
    from types import SimpleNamespace

    def at(uptime, compile_s):      # the two fields of a JvmCounters reading the share needs
        return SimpleNamespace(uptime_s=uptime, compile_s=compile_s)

    assert compile_pct(at(10.0, 4.0), at(13.0, 4.6)) == pytest.approx(20.0)
    assert compile_pct(at(10.0, 4.0), at(13.0, 10.0)) == pytest.approx(200.0)    # two compiler threads
    assert compile_pct(None, at(13.0, 4.0)) is None
    assert compile_pct(at(10.0, None), at(13.0, 4.0)) is None
    assert compile_pct(at(13.0, 4.0), at(13.0, 4.0)) is None                       # no time between them


def test_the_jit_rule_round_trips_and_is_said_in_the_block_and_the_rule_text():
    w = WarmUp(3, (1000.0, 2000.0, 2050.0, 2010.0), 12.3, 12.3, 3, 10.0, "wrk", (80.0, 20.0, 6.0, 3.0), 5)
    data = w.to_dict()
    assert data["rule"]["jit_pct"] == 5 and data["windows_compile_pct"] == [80.0, 20.0, 6.0, 3.0]
    assert WarmUp.from_dict(data) == w
    assert "windows_compile_pct" not in WarmUp(3, (1.0,), 3.0, None).to_dict()
    ctx = HostContext(warmup_s=45, warmup_window_s=3, steady_pct=10, jit_quiet_pct=5)
    block = next(b for b in REGISTRY.get("baseline").plan(ctx) if b.id == "warm-up")
    assert "JIT compiles for at most 5 %" in block.title
    from tunepath.publish.display import warmup_text
    assert "the JIT compiled for at most 5 % of the last one" in warmup_text(
        recorded=True, steady_state=True, window_s=3, windows=3, pct=10, cap_s=45, jit_pct=5)
    assert "JIT" not in warmup_text(recorded=True, steady_state=True, window_s=3, windows=3, pct=10, cap_s=45)


def _warm(monkeypatch, rates, compile_s, readable=True):
    """live.warmup.warm_up against a fake session: each window serves the next of ``rates``, and the
    JVM's compile time reads the next of ``compile_s`` (3 s of uptime a window)."""
    from types import SimpleNamespace

    from tunepath.live import warmup

    served, clock = iter(rates), iter(range(100))

    def counters(_host, _pid):
        t = next(clock)
        return SimpleNamespace(uptime_s=3.0 * t, compile_s=compile_s[t]) if readable else None

    monkeypatch.setattr(warmup, "_rate", lambda text, tool: next(served))
    monkeypatch.setattr(warmup, "snapshot", counters)
    host = SimpleNamespace(run=lambda *a, **k: SimpleNamespace(ok=True, stdout="", exited=0))
    ctx = HostContext(warmup_s=45, warmup_window_s=3, steady_windows=3, steady_pct=10, jit_quiet_pct=10,
                      probe_with="wrk")
    session = SimpleNamespace(ctx=ctx, host=lambda role: host, server=host, tool=SimpleNamespace(name="wrk2"),
                              tomcat=SimpleNamespace(pid=lambda: 4242),
                              recorder=SimpleNamespace(block=lambda *a, **k: None))
    block = SimpleNamespace(host="client", id="warm-up", text="wrk -c64 -t2 -d3 http://h/")
    return warmup.warm_up(session, REGISTRY.get("baseline"), block, "baseline/stock", 1)


def test_the_warm_up_waits_for_the_jit_and_records_each_window(monkeypatch):
    rates = [3000.0, 20000.0, 21000.0, 21500.0, 21200.0, 30000.0, 30500.0, 30200.0]
    compile_s = [0.0, 3.0, 6.0, 8.0, 9.5, 10.0, 10.1, 10.15, 10.2]          # cumulative, per reading
    warm = _warm(monkeypatch, rates, compile_s)
    assert len(warm.rates) == 8 and warm.steady and warm.jit_pct == 10    # not at window 5 (steady rates): the JIT still ran
    assert [round(c) for c in warm.compile_pct] == [100, 100, 67, 50, 17, 3, 2, 2]


def test_unreadable_jit_counters_leave_the_throughput_rule_alone(monkeypatch):
    warm = _warm(monkeypatch, [3000.0, 20000.0, 21000.0, 21500.0], [], readable=False)
    assert len(warm.rates) == 4 and warm.steady and warm.jit_pct is None and warm.compile_pct == ()
