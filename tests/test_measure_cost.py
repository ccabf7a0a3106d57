"""What a measurement costs and what it counts: the load record, the counted window, one JVM per
round where the server does not change, and the quick profile's fixed rounds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunepath.analysis.stats import StoppingRule
from tunepath.live.loadgen import PROFILES
from tunepath.live.measure import Phases, counted_window
from tunepath.live.repeat import families, shares_jvm
from tunepath.model.context import HostContext
from tunepath.model.load import LoadSpec, load_spec
from tunepath.steps import REGISTRY, STEPS

get = REGISTRY.get

pytestmark = pytest.mark.fast

LAB = HostContext(load_generator="~/.tunepath/bin/wrk2", threads=2, connections=64, rate=14000, duration_s=15,
                  load_warmup_s=3, uncorrected=True, latency_flag=True, warmup_s=45, warmup_window_s=3)


def test_the_counted_window_is_what_the_figures_cover():
    """-W: its seconds are warm-up, -d counts; stock wrk2 counts -d less its calibration; a run too short
    to calibrate counts whole; other tools count what they were asked for."""
    assert counted_window(LAB, "wrk2 -c64 -t2 -R14000 -W10 -d15 -U --latency http://h/", "wrk2", False) == (10, 0, 15)
    warm, calibration, counted = counted_window(LAB, "wrk2 -c64 -t2 -R14000 -d26 --latency http://h/", "wrk2", False)
    assert warm == 0 and calibration == pytest.approx(10.16) and counted == pytest.approx(15.84)
    assert counted_window(LAB, "wrk2 -c8 -t1 -R2000 -d3 http://h/", "wrk2", False) == (0, 0, 3)
    assert counted_window(LAB, "ab -k -c 64 -t 15 -n 100000000 http://h/", "ab", False) == (0, 0, 15)
    assert counted_window(LAB, "wrk -c64 -t2 -d15 --latency http://h/", "wrk", False) == (0, 0, 15)


def test_phases_leave_the_rest_to_orchestration():
    clock = Phases(t0=100.0, restart_s=2.5, warmup_s=10.0, counted_s=15.0)
    out = clock.to_dict(now=128.5)
    assert out["wall_s"] == 28.5 and out["orchestration_s"] == pytest.approx(1.0)
    assert Phases(t0=0.0, counted_s=5.0).to_dict(now=4.0)["orchestration_s"] == 0.0   # never negative
    # the JVM's own stop (Tomcat's shutdown until the process is gone) is a phase of its own, not orchestration
    out = Phases(t0=100.0, restart_s=2.5, warmup_s=10.0, counted_s=15.0, stop_s=0.8).to_dict(now=128.5)
    assert out["stop_s"] == 0.8 and out["orchestration_s"] == pytest.approx(0.2)


def test_the_load_spec_renders_the_path_s_commands():
    spec = load_spec(LAB)
    assert spec == LoadSpec("~/.tunepath/bin/wrk2", LAB.url, 64, 2, 15, rate=14000, warmup_s=3, latency=True,
                            uncorrected=True, nofile=LAB.raise_nofile)
    assert spec.seconds == 18 and spec.counted_s == 15
    assert spec.command().endswith(f"~/.tunepath/bin/wrk2 -c64 -t2 -R14000 -W3 -d15 -U --latency {LAB.url}")
    probe = spec.closed("wrk")
    assert probe.command().endswith(f"wrk -c64 -t2 -d15 {LAB.url}") and not probe.open_loop
    with_header = spec.with_(headers=("Accept-Encoding: gzip",)).command()
    assert "-H 'Accept-Encoding: gzip'" in with_header


def test_every_measurement_warms_up_closed_loop_and_calibrates_before_it_counts():
    """The JVM warms up in closed-loop windows (a cold JVM offered a fixed rate falls behind, and
    wrk2's schedule would carry that backlog into the counted window); the measurement's wrk2 then
    calibrates in its -W seconds and counts -d. The steps that share one JVM warm it once per round."""
    for name, load in (("baseline", "load"), ("jvm", "load"), ("thread-sweep", "load"),
                       ("load-generators", "load-wrk2"), ("proxy", "load-direct")):
        blocks = {b.id: b.text for b in get(name).plan(LAB)}
        assert blocks["warm-up"].endswith(f"wrk -c64 -t2 -d3 {LAB.url}"), name     # one closed-loop window
        assert " -W3 -d15 " in blocks[load], name


def _session(ctx):
    return SimpleNamespace(ctx=ctx)


def test_one_jvm_per_round_only_where_the_server_does_not_change():
    shared = {s.name for s in STEPS if s.live and shares_jvm(_session(LAB), s, [v.name for v in s.variants_for(LAB)])}
    assert shared == {"load-generators", "proxy", "rate-sweep"}    # the rate sweep climbs on one JVM anyway


def test_the_quick_profile_runs_the_rounds_its_comparisons_need_and_never_looks_at_the_data():
    quick = PROFILES["quick"]
    rule = StoppingRule(min_repetitions=quick.repetitions, max_repetitions=quick.max_repetitions, fixed=True)
    baseline = families(get("baseline"), ["stock", "access-log-off", "threads"])
    sweep = families(get("thread-sweep"), [f"threads-{n}" for n in quick.sweep_threads], against_best=True)
    assert rule.first_stop(baseline) == 4 and rule.first_stop(sweep) == 5
    wide = {"stock": [1.0, 2.0, 3.0, 9.0], "access-log-off": [1.0, 5.0, 2.0, 8.0], "threads": [3.0, 1.0, 7.0, 2.0]}
    more, why = rule.decide(wide, 0.0, 0.0, baseline)
    assert not more and "fixed in advance" in why        # wide intervals do not buy more rounds
    more, _ = rule.decide({k: v[:3] for k, v in wide.items()}, 0.0, 0.0, baseline)
    assert more
    short = dict(wide, threads=[3.0, 1.0, 7.0])            # a left-out repetition: one more round
    assert rule.decide(short, 0.0, 0.0, baseline)[0]
    looking = StoppingRule(min_repetitions=4, max_repetitions=6)
    assert looking.decide(wide, 0.0, 0.0, baseline)[0]      # the looking rule would go on for width
