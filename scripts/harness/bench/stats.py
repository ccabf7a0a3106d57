"""Seeded simulation of the stopping rule and the tests: ``scripts/bench --only stats``.

Every case draws repetitions from known distributions (lognormal around a median of 1, so a
spread σ is a CV of about σ), runs the live loop's decision after each round
(:class:`tunepath.analysis.stats.StoppingRule` with the profiles' settings, or the rule before
issue 17 for contrast), and then reads the figures as the pages do. It reports:

- **rule** (two configurations, one comparison): the rounds run; how often a real 5 % difference
  is found significant (*detection*); how often two identical configurations are
  (*false-significant*); how often the intervals of the medians cover the true median, against
  the mean level they state;
- **one configuration** (a step that compares nothing): coverage against the stated level;
- **sweep** (eight identical thread counts, then four of them 5 % slower): how often the reading
  calls some count different from the best, uncorrected, Holm over the seven comparisons with
  the best, and Holm over every pair (what the page does: the best is chosen from the same data);
- **shapes** (equal medians, CVs 1 % and 10 %): false-significant rate of the exact test, and how
  often the page's ``shapes-differ`` flag is set beside such a verdict;
- **two modes** (each repetition, with chance ½, 80 % slower): how often the ``two-modes`` flag
  is set, how often the rounds stop with every repetition in one mode, and the coverage.

The docs/statistics.md table is :func:`markdown` of :func:`run` with the default trials.
"""

from __future__ import annotations

import itertools

import numpy as np

from tunepath.analysis import stats
from tunepath.analysis.modes import find_gap
from tunepath.analysis.noise import SHAPE_CV_RATIO

__all__ = ["PROFILES", "SIGMAS", "run", "rule_case", "single_case", "sweep_case", "shape_case", "mode_case",
           "markdown", "targets"]

PROFILES = {"quick": dict(min_repetitions=4, max_repetitions=6, fixed=True),
            "full": dict(min_repetitions=3, max_repetitions=10)}
BEFORE = dict(min_repetitions=3, max_repetitions=5)     # the quick profile under the rule before issue 17


def _rule(profile: str, old: bool = False) -> stats.StoppingRule:
    return stats.StoppingRule(ci_target_pct=TARGET_PCT, **(BEFORE if old else PROFILES[profile]))
SIGMAS = (0.01, 0.03, 0.05, 0.10)
EFFECT = 1.05          # the real difference to detect: 5 %
TARGET_PCT = 5.0


def _before(samples: dict, rule: stats.StoppingRule) -> bool:
    """The rule before issue 17: stop once every interval, at whatever level it reaches, is within
    the target after ``min_repetitions`` rounds (True: another round)."""
    rounds = min(len(v) for v in samples.values())
    if rounds >= rule.max_repetitions:
        return False
    wide = any(w is None or w > rule.ci_target_pct for w in rule.widths(samples).values())
    return rounds < rule.min_repetitions or wide


def _rounds(data: np.ndarray, names: list[str], rule: stats.StoppingRule, families, old: bool) -> int:
    """How many rounds the rule runs on ``data`` (one row of values per configuration)."""
    for n in range(1, data.shape[1] + 1):
        samples = {name: list(row[:n]) for name, row in zip(names, data)}
        more = _before(samples, rule) if old else rule.decide(samples, 0.0, 0.0, families)[0]
        if not more:
            return n
    return data.shape[1]


def _draw(rng: np.random.Generator, medians, sigma: float, n: int) -> np.ndarray:
    return np.asarray(medians, dtype=float)[:, None] * np.exp(rng.normal(0.0, sigma, size=(len(medians), n)))


def _covered(data: np.ndarray, medians, n: int) -> tuple[int, float, int]:
    """(intervals covering the true median, sum of stated levels, intervals) at ``n`` values."""
    hits = level = count = 0
    for row, median in zip(data, medians):
        s = stats.summarise(row[:n])
        if s.low is not None:
            hits += bool(s.low <= median <= s.high)
            level += s.level
            count += 1
    return hits, level, count


def rule_case(profile: str, sigma: float, trials: int, seed: int, old: bool = False) -> dict:
    """Two configurations compared (A then B), with and without a real 5 % difference."""
    rule = _rule(profile, old)
    names, families = ["a", "b"], [(("a", "b"),)]
    rng = np.random.default_rng(seed)
    out = {"profile": profile, "sigma": sigma, "rule": "before" if old else "now", "trials": trials}
    rounds, hits, level, count = [], 0, 0.0, 0
    for effect, key in ((EFFECT, "detection"), (1.0, "false_significant")):
        found = 0
        for _ in range(trials):
            medians = (1.0, effect)
            data = _draw(rng, medians, sigma, rule.max_repetitions)
            n = _rounds(data, names, rule, families, old)
            found += bool(stats.compare(data[0, :n], data[1, :n]).significant)
            h, lv, c = _covered(data, medians, n)
            hits, level, count, rounds = hits + h, level + lv, count + c, rounds + [n]
        out[key] = found / trials
    out.update(rounds=float(np.mean(rounds)), coverage=hits / count, stated=level / count)
    return out


def single_case(profile: str, sigma: float, trials: int, seed: int, old: bool = False) -> dict:
    """One configuration, no comparison: coverage of its median's interval against its stated level."""
    rule = _rule(profile, old)
    rng = np.random.default_rng(seed)
    hits, level, count, rounds = 0, 0.0, 0, []
    for _ in range(trials):
        data = _draw(rng, (1.0,), sigma, rule.max_repetitions)
        n = _rounds(data, ["a"], rule, [], old)
        h, lv, c = _covered(data, (1.0,), n)
        hits, level, count, rounds = hits + h, level + lv, count + c, rounds + [n]
    return {"profile": profile, "sigma": sigma, "rule": "before" if old else "now", "trials": trials,
            "rounds": float(np.mean(rounds)), "coverage": hits / count, "stated": level / count}


def _sweep_reading(data: np.ndarray, n: int) -> tuple[set, set, set]:
    """The counts called different from the best: uncorrected, Holm over the comparisons with
    the best, Holm over every pair (the page)."""
    k = data.shape[0]
    best = int(np.argmax(np.median(data[:, :n], axis=1)))
    diffs = {(i, j): stats.compare(data[i, :n], data[j, :n]) for i, j in itertools.combinations(range(k), 2)}
    pair = lambda i: (min(i, best), max(i, best))      # noqa: E731
    others = [i for i in range(k) if i != best]
    raw = {i for i in others if diffs[pair(i)].significant}
    vs_best = stats.holm_verdicts([diffs[pair(i)] for i in others])
    every = dict(zip(diffs, stats.holm_verdicts(list(diffs.values()))))
    return raw, {i for i, v in zip(others, vs_best) if v}, {i for i in others if every[pair(i)]}


def sweep_case(sigma: float, trials: int, seed: int, slower: int = 0) -> dict:
    """Eight thread counts measured under the full profile's rule (every pair compared): with
    ``slower`` of them 5 % slower, how often a count is called different (family-wise error
    when none differ; the share of slower counts found when some do)."""
    rule = stats.StoppingRule(ci_target_pct=TARGET_PCT, **PROFILES["full"])
    names = [f"t{i}" for i in range(8)]
    families = [tuple(itertools.combinations(names, 2))]
    rng = np.random.default_rng(seed)
    medians = [1.0] * (8 - slower) + [1 / EFFECT] * slower
    wrong, found, rounds = np.zeros(3), np.zeros(3), []
    for _ in range(trials):
        data = _draw(rng, medians, sigma, rule.max_repetitions)
        n = _rounds(data, names, rule, families, old=False)
        rounds.append(n)
        for m, called in enumerate(_sweep_reading(data, n)):
            wrong[m] += any(i < 8 - slower for i in called)
            found[m] += sum(i >= 8 - slower for i in called) / max(1, slower)
    keys = ("uncorrected", "holm_vs_best", "holm_all_pairs")
    return {"sigma": sigma, "slower": slower, "trials": trials, "rounds": float(np.mean(rounds)),
            "any_wrong": dict(zip(keys, (wrong / trials).tolist())),
            "found": dict(zip(keys, (found / trials).tolist())) if slower else None}


def shape_case(n: int, trials: int, seed: int) -> dict:
    """Equal medians, CVs 1 % and 10 %: how often "significant", and how often flagged."""
    rng = np.random.default_rng(seed)
    sig = flagged = 0
    for _ in range(trials):
        a, b = np.exp(rng.normal(0, 0.01, n)), np.exp(rng.normal(0, 0.10, n))
        if stats.compare(a, b).significant:
            sig += 1
            cv_a, cv_b = np.std(a, ddof=1) / np.mean(a), np.std(b, ddof=1) / np.mean(b)
            flagged += bool(max(cv_a, cv_b) / min(cv_a, cv_b) >= SHAPE_CV_RATIO)
    return {"n": n, "trials": trials, "false_significant": sig / trials,
            "flagged_when_significant": flagged / sig if sig else None}


def mode_case(profile: str, trials: int, seed: int) -> dict:
    """One configuration whose repetitions fall, each with chance ½, into a fast mode (1) or a
    mode 80 % slower, 3 % spread in each (the true median is √1.8), under the profile's rule:
    rounds, how often ``two-modes`` is flagged, how often the rounds stopped with every
    repetition in one mode, coverage against the stated level; and the false flags of one mode
    (5 % spread) at the same number of repetitions."""
    rule = stats.StoppingRule(ci_target_pct=TARGET_PCT, **PROFILES[profile])
    rng = np.random.default_rng(seed)
    truth = float(np.sqrt(1.8))
    flagged = false = one_mode = hits = count = 0
    level, rounds = 0.0, []
    for _ in range(trials):
        slow = rng.random(rule.max_repetitions) < 0.5
        data = (np.where(slow, 1.8, 1.0) * np.exp(rng.normal(0, 0.03, rule.max_repetitions)))[None, :]
        n = _rounds(data, ["a"], rule, [], old=False)
        rounds.append(n)
        flagged += bool(find_gap(data[0, :n]).bimodal)
        one_mode += bool(slow[:n].all() or not slow[:n].any())
        h, lv, c = _covered(data, (truth,), n)
        hits, level, count = hits + h, level + lv, count + c
        false += bool(find_gap(np.exp(rng.normal(0, 0.05, n))).bimodal)
    return {"profile": profile, "trials": trials, "rounds": float(np.mean(rounds)), "flagged": flagged / trials,
            "one_mode_only": one_mode / trials, "coverage": hits / count, "stated": level / count,
            "false_flags": false / trials}


def run(trials: int = 4000, seed: int = 17, sigmas=SIGMAS) -> dict:
    """Every case, seeded (each case its own seed, so a subset reproduces the same numbers)."""
    out = {"trials": trials, "seed": seed, "rule": [], "single": [], "sweep": [], "shapes": [], "modes": []}
    for i, (profile, sigma, old) in enumerate(itertools.product(PROFILES, sigmas, (True, False))):
        out["rule"].append(rule_case(profile, sigma, trials, seed + i, old))
        out["single"].append(single_case(profile, sigma, trials, seed + 100 + i, old))
    sweep_trials = max(100, trials // 4)
    for i, (sigma, slower) in enumerate(itertools.product((0.01, 0.03), (0, 4))):
        out["sweep"].append(sweep_case(sigma, sweep_trials, seed + 200 + i, slower))
    out["shapes"] = [shape_case(n, trials, seed + 300 + n) for n in (5, 10)]
    out["modes"] = [mode_case(profile, trials, seed + 400 + i) for i, profile in enumerate(PROFILES)]
    return out


def targets(result: dict, margin: float = 0.0) -> list[str]:
    """The issue's targets the result misses (``margin``: allowance for a smaller trial count)."""
    bad = []
    for r in (x for x in result["rule"] if x["rule"] == "now"):
        where = f"{r['profile']} σ={r['sigma']:.0%}"
        if r["sigma"] <= 0.01 and r["detection"] < 0.95 - margin:
            bad.append(f"{where}: detection {r['detection']:.1%} < 95 %")
        if r["false_significant"] > 0.05 + margin:
            bad.append(f"{where}: false-significant {r['false_significant']:.1%} > 5 %")
    for r in (x for x in result["rule"] + result["single"] if x["rule"] == "now"):
        if abs(r["coverage"] - r["stated"]) > 0.01 + margin:
            bad.append(f"{r['profile']} σ={r['sigma']:.0%}: coverage {r['coverage']:.1%} against "
                       f"{r['stated']:.1%} stated")
    for r in (x for x in result["sweep"] if not x["slower"]):
        if r["any_wrong"]["holm_all_pairs"] > 0.05 + margin:
            bad.append(f"sweep σ={r['sigma']:.0%}: family-wise error {r['any_wrong']['holm_all_pairs']:.1%} > 5 %")
    return bad


def _pct(x) -> str:
    return "—" if x is None else f"{x * 100:.1f} %"


def markdown(result: dict) -> str:
    """The tables of docs/statistics.md."""
    lines = [f"Seed {result['seed']}, {result['trials']} trials per row and case (sweeps: a quarter).", "",
             "| profile | σ | rule | rounds | detection of +5 % | false-significant | coverage | stated | "
             "coverage − stated | one configuration: rounds | coverage | stated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, s in zip(result["rule"], result["single"]):
        lines.append(f"| {r['profile']} | {r['sigma']:.0%} | {r['rule']} | {r['rounds']:.2f} | {_pct(r['detection'])} | "
                     f"{_pct(r['false_significant'])} | {_pct(r['coverage'])} | {_pct(r['stated'])} | "
                     f"{(r['coverage'] - r['stated']) * 100:+.1f} | {s['rounds']:.2f} | {_pct(s['coverage'])} | "
                     f"{_pct(s['stated'])} |")
    lines += ["", "| sweep: σ | counts 5 % slower | rounds | some count called different wrongly: uncorrected | "
                  "Holm vs best | Holm, every pair | slower counts found: uncorrected | Holm vs best | Holm, every pair |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in result["sweep"]:
        w, f = r["any_wrong"], r["found"] or {}
        lines.append(f"| {r['sigma']:.0%} | {r['slower']} | {r['rounds']:.2f} | {_pct(w['uncorrected'])} | "
                     f"{_pct(w['holm_vs_best'])} | {_pct(w['holm_all_pairs'])} | {_pct(f.get('uncorrected'))} | "
                     f"{_pct(f.get('holm_vs_best'))} | {_pct(f.get('holm_all_pairs'))} |")
    lines += ["", "| shapes: n a side | false-significant at equal medians (CV 1 % vs 10 %) | flagged shapes-differ "
                  "when significant |", "|---|---|---|"]
    lines += [f"| {r['n']} | {_pct(r['false_significant'])} | {_pct(r['flagged_when_significant'])} |"
              for r in result["shapes"]]
    lines += ["", "| two modes: profile | rounds | flagged two-modes | stopped in one mode | coverage of the "
                  "median | stated | false flags at one mode (5 % spread) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['profile']} | {r['rounds']:.2f} | {_pct(r['flagged'])} | {_pct(r['one_mode_only'])} | "
              f"{_pct(r['coverage'])} | {_pct(r['stated'])} | {_pct(r['false_flags'])} |" for r in result["modes"]]
    missed = targets(result)
    lines += ["", "Targets (rule now: detection ≥ 95 % at σ = 1 %, false-significant ≤ 5 %, coverage within "
                  "1 point of stated; sweep family-wise error ≤ 5 %): "
              + ("all met." if not missed else "missed: " + "; ".join(missed))]
    return "\n".join(lines)


if __name__ == "__main__":      # pragma: no cover
    import sys

    print(markdown(run(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)))
