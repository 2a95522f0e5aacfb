"""Diagnose the six real GRPO logs and compare with the README's reading; then the SIMULATED
logs in other trainers' shapes (bench/simulated_logs.py: verl console, a hand-written loop,
OpenRLHF), written to a temporary folder, against what their simulation put in them.

Usage: python bench/diagnose_real_logs.py [LOG_DIR] [--smoke]   (default:
../shared/data/real-grpo-logs relative to the repo root). Exit code 1 when any file disagrees
with its expectation. ``--smoke`` is accepted like every bench's (tests/test_benches.py): the
whole run already takes seconds, so it is the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tempfile

from app.diagnostics import diagnose
from app.imports.service import diagnose_path as diagnose_file
from app.imports.service import load_log
from bench.simulated_logs import write_all

HAND_MAP = {"Reward": "reward", "KL_ref": "kl", "Loss": "loss"}
# simulated file -> (what was simulated, key mapping, expected verdict, categories >= warning)
SIMULATED = {
    "verl_collapse.console.log": ("verl: score rises then collapses", None, "critical",
                                  {"reward_collapse"}),
    "handwritten_stalled.log": ("hand-written loop, its spellings read by the loop vocabulary",
                                None, "warning", {"stalled"}),
    "openrlhf_length.jsonl": ("OpenRLHF: length grows 4x, reward flat", None, "warning",
                              {"length_explosion", "stalled"}),
}
# issue 23's shapes (bench/simulated_logs.py): (what was simulated, verdict, categories that
# must be >= warning, categories that must not be above info, {category: (lo, hi)} first step)
SHAPES = {
    "trl_smoke_constant.trainer_state.json": (
        "5-step smoke run, constant reward", "critical", {"zero_reward_spread"}, set(), {}),
    "trl_old_zero_std.trainer_state.json": (
        "old keys, reward_std == 0 on 3 steps in 4, grad_norm only on the others", "critical",
        {"zero_reward_spread"}, {"numerical_instability"}, {}),
    "trl_climb_plateau.trainer_state.json": (
        "climbs -10 -> 0 until step 60, then flat", "warning", {"stalled"}, set(),
        {"stalled": (50, 80)}),
    "trl_pinned_cap.trainer_state.json": (
        "at the length cap from step 1, no growth", "warning", {"truncation"},
        {"length_explosion"}, {}),
    "trl_collapse_from_peak.trainer_state.json": (
        "climbs to a peak at 400, falls most of the way back, length grows", "critical",
        {"reward_collapse"}, {"stalled"}, {"reward_collapse": (300, 500)}),
    "trl_component_hacking.trainer_state.json": (
        "style rises while judge falls, no weight-0 objective", "warning", {"reward_hacking"},
        set(), {}),
}
MAPPED_WHAT = "hand-written loop with --map Reward=reward KL_ref=kl Loss=loss: flat reward"
SIMULATED_MAPPED = ("handwritten_stalled.log", (MAPPED_WHAT, HAND_MAP, "warning", {"stalled"}))

# file -> (README reading, expected verdict, categories that must be >= warning,
#          categories that must not be above info)
EXPECT = {
    "gemma3_gsm8k.trainer_state.json": (
        "healthy; two dead format components (info)", "healthy", set(),
        {"stalled", "kl_blowup", "length_collapse", "reward_hacking"}),
    "minesweeper_agent.trainer_state.json": (
        "stalled from ~60; completions at the 128 cap (truncation)", "warning",
        {"stalled", "truncation"},  # pinned at the cap, no growth: not a length explosion
        {"entropy_collapse", "kl_blowup", "kl_spike", "length_explosion"}),
    "qwen7b_gsm8k_saturated.console.log": (
        "zero reward spread, too easy", "warning", {"zero_reward_spread"},
        {"entropy_collapse"}),
    "telelogs_rca.trainer_state.json": (
        "stalled plateau; kl always 0", "warning", {"stalled"},
        {"kl_blowup", "kl_spike", "kl_offset"}),
    "code_reasoner.trainer_state.json": (
        "kl spikes, length growth, no task gain, mild hacking", "warning",
        {"kl_spike", "length_explosion"}, {"kl_blowup"}),
    "wordle_stage2.trainer_state.json": (
        "stalled; kl ~1 from step 1 (info at most); NO train/test divergence", "warning",
        {"stalled"}, {"kl_blowup", "kl_offset", "train_test_divergence"}),
}
_RANK = {"info": 0, "warning": 1, "critical": 2}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log_dir", nargs="?", type=Path,
                        default=ROOT.parent / "shared/data/real-grpo-logs")
    parser.add_argument("--smoke", action="store_true", help="the same run (it takes seconds)")
    log_dir = parser.parse_args().log_dir
    bad = 0
    for name, (reading, verdict, must, not_above_info) in EXPECT.items():
        path = log_dir / name
        if not path.exists():
            print(f"== {name}: missing in {log_dir}")
            bad += 1
            continue
        d = diagnose_file(path)
        warned = {f.category for f in d.findings if _RANK[f.severity] >= 1}
        problems = []
        if d.verdict != verdict:
            problems.append(f"verdict {d.verdict} != {verdict}")
        if must - warned:
            problems.append(f"missing {sorted(must - warned)}")
        if warned & not_above_info:
            problems.append(f"unexpected {sorted(warned & not_above_info)}")
        print(f"== {name}\n   README: {reading}\n   ours:   {d.verdict.upper()}")
        for f in d.findings:
            print(f"     {f.severity:8s} {f.category:22s} steps {f.first_step}-{f.last_step}"
                  f"  {f.metric or ''}")
        print(f"   agree:  {'YES' if not problems else 'NO: ' + '; '.join(problems)}")
        bad += bool(problems)
    print(f"\n{len(EXPECT) - bad}/{len(EXPECT)} files agree with the README reading")
    return 1 if bad + short_prefixes(log_dir) + simulated() else 0


SHORT_ROWS = range(5, 21)  # a smoke test's length: the short-run rules judge these (issue 31)


def short_prefixes(log_dir: Path) -> int:
    """Every 5..20-row prefix of a log the README reads as healthy must stay healthy (the
    short-run rules must not call a healthy smoke test a collapse); the number that do not."""
    bad = 0
    for name, (_, verdict, _, _) in EXPECT.items():
        path = log_dir / name
        if verdict != "healthy" or not path.exists():
            continue
        rows = load_log(path).rows
        flagged = {n: sorted({f.category for f in diagnose(rows[:n]).findings
                              if _RANK[f.severity] >= 1}) for n in SHORT_ROWS if n <= len(rows)}
        flagged = {n: c for n, c in flagged.items() if c}
        print(f"== SHORT {name}: first {SHORT_ROWS.start}-{SHORT_ROWS.stop - 1} rows "
              + ("all healthy" if not flagged else f"NOT healthy: {flagged}"))
        bad += bool(flagged)
    return bad


def simulated() -> int:
    """Diagnose the simulated logs; the number that disagree with their simulation."""
    bad = 0
    cases = [*SIMULATED.items(), SIMULATED_MAPPED]
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_all(Path(tmp))
        for name, (what, mapping, verdict, must) in cases:
            d = diagnose_file(paths[name], mapping=mapping)
            warned = {f.category for f in d.findings if _RANK[f.severity] >= 1}
            problems = ([f"verdict {d.verdict} != {verdict}"] if d.verdict != verdict else []) \
                + ([f"missing {sorted(must - warned)}"] if must - warned else [])
            print(f"== SIMULATED {name}\n   made:   {what}\n   ours:   {d.verdict.upper()} "
                  f"{sorted(warned)}; read {len(d.metrics)} metrics, {len(d.unchecked)} checks "
                  f"unchecked\n   agree:  {'YES' if not problems else 'NO: ' + '; '.join(problems)}")
            bad += bool(problems)
        bad += shapes(paths)
    total = len(cases) + len(SHAPES)
    print(f"{total - bad}/{total} simulated logs agree with their simulation")
    return bad


def shapes(paths: dict[str, Path]) -> int:
    """Diagnose the issue-23 shapes; the number that disagree with their simulation."""
    bad = 0
    for name, (what, verdict, must, not_above_info, starts) in SHAPES.items():
        d = diagnose_file(paths[name])
        warned = {f.category for f in d.findings if _RANK[f.severity] >= 1}
        problems = ([f"verdict {d.verdict} != {verdict}"] if d.verdict != verdict else []) \
            + ([f"missing {sorted(must - warned)}"] if must - warned else []) \
            + ([f"unexpected {sorted(warned & not_above_info)}"] if warned & not_above_info
               else [])
        for category, (lo, hi) in starts.items():
            first = [f.first_step for f in d.findings if f.category == category]
            if first and not lo <= first[0] <= hi:
                problems.append(f"{category} from step {first[0]}, not in {lo}-{hi}")
        print(f"== SIMULATED {name}\n   made:   {what}\n   ours:   {d.verdict.upper()}")
        for f in d.findings:
            print(f"     {f.severity:8s} {f.category:22s} steps {f.first_step}-{f.last_step}"
                  f"  {f.metric or ''}")
        print(f"   agree:  {'YES' if not problems else 'NO: ' + '; '.join(problems)}")
        bad += bool(problems)
    return bad


if __name__ == "__main__":
    sys.exit(main())
