"""Lead time: at which step each labelled failure is first flagged when rows arrive live.

Usage: python bench/lead_time.py [LOG_DIR] [--smoke]   (default ../shared/data/real-grpo-logs
relative to the repo root; the logs are read from there, never copied). ``--smoke``: one run
of each kind, the same path, in seconds (tests/test_benches.py runs it).

Labelled runs: the six shared real logs, with the failure and onset step their README gives
(the healthy one is the false-alarm check), runs trained to fail with the real worker
(bench/failing_runs.py fixtures), SIMULATED logs in issue 23's shapes (bench/simulated_logs.py,
labelled with the onset their simulation put in), and synthetic failing runs (tests/diagnostics/failure_runs.py:
each fails one way from a known step). Every run is fed
to ``DiagnosticsState.update`` one logging step at a time, as the app receives it, and the
table prints for each failure the labelled onset, the first step its category was raised
as a warning (or worse) and as critical, as steps after the onset and as a share of the run.
These are the detectors' raw findings; on a live run the page shows a new finding after it
held for 3 more evaluations (app/health/stability.py), which adds a few logging steps.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.diagnostics import DiagnosticsState, RunContext
from app.diagnostics.model import severity_rank
from app.importers import load_log
from bench.simulated_logs import write_all
from tests.diagnostics.conftest import healthy_rows
from tests.diagnostics.failure_runs import RUNS

DEFAULT_DIR = ROOT.parent / "shared" / "data" / "real-grpo-logs"
FIXTURES = ROOT / "tests" / "diagnostics" / "fixtures" / "failing_runs"


@dataclass(frozen=True)
class Label:
    run: str
    category: str | None  # None: a healthy run (any warning is a false alarm)
    onset: int
    reading: str


# From the README's readings of the shared logs (onset = where the reader sees it begin).
REAL = (
    Label("gemma3_gsm8k.trainer_state.json", None, 0, "healthy"),
    Label("minesweeper_agent.trainer_state.json", "stalled", 60, "stalled from about step 60"),
    Label("minesweeper_agent.trainer_state.json", "truncation", 10,
          "at the 128-token cap all run"),
    Label("qwen7b_gsm8k_saturated.console.log", "zero_reward_spread", 5,
          "zero spread, too easy, steps 5-200"),
    Label("telelogs_rca.trainer_state.json", "stalled", 1, "stalled plateau, steps 1-200"),
    Label("code_reasoner.trainer_state.json", "kl_spike", 20, "KL spikes from step 20"),
    Label("code_reasoner.trainer_state.json", "length_explosion", 5,
          "length 196 -> 650 over steps 5-700"),
    Label("code_reasoner.trainer_state.json", "stalled", 5, "total reward flat over the run"),
    Label("wordle_stage2.trainer_state.json", "stalled", 1, "stalled"),
)


@dataclass
class Firsts:
    warning: int | None = None
    critical: int | None = None
    any_warning: tuple[int, str] | None = None  # first warning of any category (false alarms)


def replay(rows: list[tuple[int, dict]], context: RunContext | None,
           categories: set[str]) -> dict[str | None, Firsts]:
    """Feed rows one logging step at a time; first warning/critical step per category."""
    out = {c: Firsts() for c in categories} | {None: Firsts()}
    state = DiagnosticsState.new(context)
    for step, group in groupby(rows, key=lambda r: r[0]):
        diagnosis = state.update(list(group))
        for f in diagnosis.findings:
            rank = severity_rank(f.severity)
            if rank >= 1 and out[None].any_warning is None:
                out[None].any_warning = (step, f.category)
            firsts = out.get(f.category)
            if firsts is None:
                continue
            if rank >= 1 and firsts.warning is None:
                firsts.warning = step
            if rank >= 2 and firsts.critical is None:
                firsts.critical = step
    return out


def cell(first: int | None, onset: int, first_step: int, last: int) -> str:
    if first is None:
        return "-"
    share = (first - onset) / max(last - first_step, 1)
    return f"{first} (+{first - onset}, {share:+.0%})"


def table(log_dir: Path, few: int | None = None) -> list[tuple]:
    """Every labelled run's row; ``few``: only the first ``few`` runs of each kind (smoke)."""
    lines = []
    by_file: dict[str, list[Label]] = {}
    for lab in REAL:
        by_file.setdefault(lab.run, []).append(lab)
    for name, labels in list(by_file.items())[:few]:
        path = log_dir / name
        if not path.exists():
            print(f"(missing {path}: skipped)")
            continue
        rows = sorted(load_log(path).rows, key=lambda r: r[0])
        firsts = replay(rows, None, {lab.category for lab in labels if lab.category})
        first_step, last = rows[0][0], rows[-1][0]
        for lab in labels:
            if lab.category is None:
                fa = firsts[None].any_warning
                lines.append((name.split(".")[0], "healthy (false alarms)", "-",
                              f"{fa[0]} {fa[1]}" if fa else "none", "-", last))
                continue
            f = firsts[lab.category]
            lines.append((name.split(".")[0], lab.category, lab.onset,
                          cell(f.warning, lab.onset, first_step, last),
                          cell(f.critical, lab.onset, first_step, last), last))
    for seed in (0, 1, 2)[:few]:  # the synthetic healthy run, fed live: any warning is a false alarm
        rows = healthy_rows(300, 1, seed)
        fa = replay(rows, None, set())[None].any_warning
        lines.append((f"healthy_synthetic_seed{seed}", "healthy (false alarms)", "-",
                      f"{fa[0]} {fa[1]}" if fa else "none", "-", rows[-1][0]))
    lines += trained(few)
    lines += simulated(few)
    for name, make in list(RUNS.items())[:few]:
        run = make()
        f = replay(run.rows, run.context, {run.category})[run.category]
        first_step = run.rows[0][0]
        lines.append((name, f"{run.category} ({run.severity})", run.onset,
                      cell(f.warning, run.onset, first_step, run.last_step),
                      cell(f.critical, run.onset, first_step, run.last_step), run.last_step))
    return lines


# Runs trained to fail (bench/failing_runs.py fixtures): where each failure begins. The tiny
# random model never emits EOS, so truncation is there from step 1 in every one of them.
TRAINED_ONSETS = {"constant_reward": 1, "impossible_reward": 1, "short_completions": 1,
                  "learning_rate_too_high": 2}  # lr 0.5: entropy 6.2 -> 0.1 from step 2


def trained(few: int | None = None) -> list[tuple]:
    import json

    lines = []
    for path in sorted(FIXTURES.glob("*.jsonl"))[:few]:
        text = path.read_text().splitlines()
        head = json.loads(text[0])
        rows = [(r["step"], r["metrics"]) for r in map(json.loads, text[1:])]
        ctx = RunContext(max_completion_length=head["spec"]["max_completion_length"])
        firsts = replay(rows, ctx, {c for c, _ in head["expect"]})
        onset, last = TRAINED_ONSETS.get(path.stem, 1), rows[-1][0]
        for category, severity in head["expect"]:
            f = firsts[category]
            lines.append((f"trained:{path.stem}", f"{category} ({severity})", onset,
                          cell(f.warning, onset, rows[0][0], last),
                          cell(f.critical, onset, rows[0][0], last), last))
    return lines


# bench/simulated_logs.py's issue-23 shapes: (file, category, onset its simulation put in)
SIMULATED = (
    ("trl_smoke_constant.trainer_state.json", "zero_reward_spread", 1),
    ("trl_old_zero_std.trainer_state.json", "zero_reward_spread", 1),
    ("trl_climb_plateau.trainer_state.json", "stalled", 60),
    ("trl_pinned_cap.trainer_state.json", "truncation", 1),
    ("trl_collapse_from_peak.trainer_state.json", "reward_collapse", 400),
    ("trl_component_hacking.trainer_state.json", "reward_hacking", 200),
)


def simulated(few: int | None = None) -> list[tuple]:
    """The simulated shapes, written to a temporary folder and fed live like the rest."""
    import tempfile

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_all(Path(tmp))
        for name, category, onset in SIMULATED[:few]:
            rows = sorted(load_log(paths[name]).rows, key=lambda r: r[0])
            f = replay(rows, None, {category})[category]
            first, last = rows[0][0], rows[-1][0]
            lines.append((f"simulated:{name.split('.')[0]}", category, onset,
                          cell(f.warning, onset, first, last),
                          cell(f.critical, onset, first, last), last))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--smoke", action="store_true", help="one run of each kind: seconds")
    args = parser.parse_args()
    head = ("run", "failure (expected)", "onset", "first warning", "first critical", "steps")
    rows = [head] + [tuple(str(x) for x in r) for r in table(args.log_dir,
                                                             1 if args.smoke else None)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for i, r in enumerate(rows):
        print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("\nfirst warning/critical: step (steps after the labelled onset, share of the run); "
          "'-' = never at that severity. Info findings are not counted.")


if __name__ == "__main__":
    main()
