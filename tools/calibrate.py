"""Measure the diagnostics like a model: verdict accuracy, per-detector precision and recall,
and lead time, on the calibration corpus of real public runs (``tests/corpus/``).

Why a harness: the detectors were right on the logs they had been shown and much less right on
new ones (issue 54). Each corpus run carries a label written before the Deck saw it; this reads
every run through the Deck's own readers (``read_and_diagnose``, as ``grpodeck diagnose`` does)
and scores the diagnosis against the label. The ``holdout`` split is reported apart: it is never
looked at while tuning, so its figures say how the verdicts hold on logs nobody tuned for.

    .venv/bin/python -m tools.calibrate            # the table
    .venv/bin/python -m tools.calibrate --json     # the same figures as JSON
    .venv/bin/python -m tools.calibrate --record   # also write tests/corpus/scores.json
    .venv/bin/python -m tools.calibrate --adopt    # new runs: split and label hash, no scoring
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
RUNS = CORPUS / "runs"
SCORES = CORPUS / "scores.json"
HASHES = CORPUS / "labels.sha256"
HOLDOUT_DIGITS = "0123"  # a run whose name hashes to one of these first hex digits is held out
FLAGGING = ("warning", "critical")  # a forbidden category is a false alarm at these severities;
#                                     a needed one is found at any severity (calibration.md)
REPLAY_POINTS = 60  # a live replay feeds the rows in this many batches (lead time)


@dataclass
class Label:
    verdict: list[str]
    need: list[list[str]]
    forbid: list[str]
    need_read: list[str]
    onset: int | None
    split: str

    @classmethod
    def load(cls, path: Path) -> Label:
        d = json.loads(path.read_text())
        return cls(list(d["verdict"]), [list(g) for g in d.get("need") or []],
                   list(d.get("forbid") or []), list(d.get("need_read") or []),
                   d.get("onset"), d.get("split", "calibration"))


@dataclass
class Result:
    """One run scored: what the Deck said against its label, and why it failed, if it did."""

    slug: str
    split: str
    verdict: str
    raised: set[str]
    read: set[str]
    label: Label
    problems: list[str] = field(default_factory=list)
    lead: int | None = None  # labelled onset minus the first live flag (positive: early)
    error: str | None = None
    repository: str = ""
    noted: set[str] = field(default_factory=set)  # categories at any severity

    @property
    def passed(self) -> bool:
        return not self.problems


def figures_file(run_dir: Path, scratch: Path) -> Path:
    """The run's figures as a plain file the readers take (a gzipped one is unpacked)."""
    plain = run_dir / "figures.jsonl"
    if plain.exists():
        return plain
    packed = run_dir / "figures.jsonl.gz"
    out = scratch / f"{run_dir.name}.jsonl"
    out.write_bytes(gzip.decompress(packed.read_bytes()))
    return out


def context_of(run_dir: Path):
    from app.diagnostics import RunContext

    src = json.loads((run_dir / "source.json").read_text())
    ctx = src.get("context") or {}
    return RunContext(max_completion_length=ctx.get("max_completion_length"),
                      num_generations=ctx.get("num_generations"))


def score(label: Label, verdict: str, raised: set[str], read: set[str],
          noted: set[str] | None = None) -> list[str]:
    """What is wrong with a diagnosis against its label (empty: the run passes): ``raised``
    are the categories at warning or critical, ``noted`` those at any severity (``raised``
    when not given)."""
    noted = raised if noted is None else noted
    problems = []
    if verdict not in label.verdict:
        problems.append(f"verdict {verdict} not in {label.verdict}")
    problems += [f"missing any of {g}" for g in label.need if not noted.intersection(g)]
    problems += [f"false alarm {c}" for c in label.forbid if c in raised]
    problems += [f"did not read {m}" for m in label.need_read if m not in read]
    return problems


def first_flag(rows: list, context, needed: set[str]) -> int | None:
    """The step at which a live replay first raises a needed category: rows fed in
    ``REPLAY_POINTS`` batches, diagnosed after each as a live run is."""
    from dataclasses import replace

    from app.diagnostics import DiagnosticsState

    live = replace(context, is_live=True)
    state = DiagnosticsState.new(live)
    size = max(1, len(rows) // REPLAY_POINTS)
    for i in range(0, len(rows), size):
        batch = rows[i:i + size]
        diagnosis = state.update(batch, live)
        if any(f.category in needed and f.severity in FLAGGING for f in diagnosis.findings):
            return int(batch[-1][0])
    return None


def run_one(run_dir: Path, scratch: Path) -> Result:
    result = _diagnosed(run_dir, scratch)
    source = json.loads((run_dir / "source.json").read_text())
    result.repository = source.get("repository", "")
    return result


def _diagnosed(run_dir: Path, scratch: Path) -> Result:
    from app.importers import LogFormatError
    from app.imports.service import read_and_diagnose
    from app.ingest import pipeline

    label = Label.load(run_dir / "label.json")
    try:
        diagnosis, log = read_and_diagnose(figures_file(run_dir, scratch), context_of(run_dir))
    except (LogFormatError, OSError) as exc:  # a refused log is a failed run, not a crash
        return Result(run_dir.name, label.split, "error", set(), set(), label,
                      [f"not read: {exc}"], error=str(exc))
    raised = {f.category for f in diagnosis.findings if f.severity in FLAGGING}
    noted = {f.category for f in diagnosis.findings}
    # "read": every canonical name the log's columns were read as (what `grpodeck diagnose`
    # lists), not only the ones a check uses (the learning rate feeds no check, yet a reader
    # that lost it misread the log)
    read = set(diagnosis.metrics) | {k for _, metrics in log.rows for k in metrics}
    result = Result(run_dir.name, label.split, diagnosis.verdict, raised, read, label,
                    score(label, diagnosis.verdict, raised, read, noted), noted=noted)
    needed = {c for g in label.need for c in g}
    if label.onset is not None and needed & raised:
        rows = pipeline.merge_by_step(log.rows, [])
        flag = first_flag(rows, context_of(run_dir), needed)
        result.lead = None if flag is None else int(label.onset) - flag
    return result


def run_all(split: str | None = None) -> list[Result]:
    dirs = sorted(p for p in RUNS.iterdir() if (p / "label.json").exists())
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_one(d, Path(tmp)) for d in dirs]
    return [r for r in results if split is None or r.split == split]


def detector_table(results: list[Result]) -> dict[str, dict]:
    """Per category: true positives (found where needed, any severity), false alarms (raised at
    warning or critical where the label forbids it), misses (needed, not found); precision and
    recall from them; ``unlabelled``: raised at warning or critical where the label neither
    needs nor forbids it (neither right nor wrong by the label, shown so none hides)."""
    tp, fp, fn, other = Counter(), Counter(), Counter(), Counter()
    for r in results:
        needed = {c for g in r.label.need for c in g}
        other.update(c for c in r.raised if c not in needed and c not in r.label.forbid)
        for g in r.label.need:
            hit = r.noted.intersection(g)
            if hit:
                tp.update(hit)
            else:
                fn.update(g[:1])
        fp.update(c for c in r.raised if c in r.label.forbid and c not in needed)
    out = {}
    for c in sorted(set(tp) | set(fp) | set(fn) | set(other)):
        prec = tp[c] / (tp[c] + fp[c]) if tp[c] + fp[c] else None
        rec = tp[c] / (tp[c] + fn[c]) if tp[c] + fn[c] else None
        out[c] = {"tp": tp[c], "false_alarms": fp[c], "misses": fn[c],
                  "precision": prec, "recall": rec, "unlabelled": other[c]}
    return out


def summary(results: list[Result]) -> dict:
    leads = [r.lead for r in results if r.lead is not None]
    return {"runs": len(results), "passed": sum(r.passed for r in results),
            "accuracy": sum(r.passed for r in results) / len(results) if results else None,
            "verdict_accuracy": (sum(r.verdict in r.label.verdict for r in results)
                                 / len(results)) if results else None,
            "repositories": len({r.repository for r in results}),
            "median_lead_steps": statistics.median(leads) if leads else None,
            "lead_measured_on": len(leads),
            "detectors": detector_table(results)}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def report(results: list[Result]) -> str:
    lines = []
    for split in ("calibration", "holdout"):
        part = [r for r in results if r.split == split]
        s = summary(part)
        lines.append(f"== {split}: {s['passed']}/{s['runs']} runs from {s['repositories']} "
                     f"repositories pass (accuracy "
                     f"{_fmt(s['accuracy'])}, verdict alone {_fmt(s['verdict_accuracy'])}), "
                     f"median lead {s['median_lead_steps']} steps over {s['lead_measured_on']}")
        for r in part:
            mark = "ok  " if r.passed else "FAIL"
            lines.append(f"  {mark} {r.slug:<48} {r.verdict:<9} "
                         + ("; ".join(r.problems) if r.problems else ""))
    lines.append("== per detector (all splits): tp / false alarms / misses / unlabelled, "
                 "precision, recall")
    for c, d in detector_table(results).items():
        lines.append(f"  {c:<26} {d['tp']:>3} {d['false_alarms']:>3} {d['misses']:>3} "
                     f"{d['unlabelled']:>3}  P {_fmt(d['precision'])}  R {_fmt(d['recall'])}")
    return "\n".join(lines)


def figures(results: list[Result]) -> dict:
    """What ``--record`` keeps and the suite compares against: accuracy per split."""
    by = {split: summary([r for r in results if r.split == split])
          for split in ("calibration", "holdout")}
    return {split: {"runs": s["runs"], "passed": s["passed"], "accuracy": s["accuracy"]}
            for split, s in by.items()}


def split_of(slug: str) -> str:
    """The split a new run gets: a quarter of names, by hash, are held out (no choice made
    while looking at a run's scores)."""
    digit = hashlib.sha256(slug.encode()).hexdigest()[0]
    return "holdout" if digit in HOLDOUT_DIGITS else "calibration"


def adopt() -> list[str]:
    """Give each new run its split and record its label's hash (run before any scoring):
    returns the runs adopted."""
    known = HASHES.read_text().splitlines() if HASHES.exists() else []
    recorded = {line.split("  ")[1] for line in known if line}
    adopted = []
    for d in sorted(p for p in RUNS.iterdir() if (p / "label.json").exists()):
        key = f"runs/{d.name}/label.json"
        if key in recorded:
            continue
        label = json.loads((d / "label.json").read_text())
        if "split" not in label:
            label["split"] = split_of(d.name)
            (d / "label.json").write_text(json.dumps(label, indent=2) + "\n")
        known.append(f"{hashlib.sha256((d / 'label.json').read_bytes()).hexdigest()}  {key}")
        adopted.append(d.name)
    HASHES.write_text("\n".join(known) + "\n")
    return adopted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--record", action="store_true", help=f"write {SCORES.name}")
    ap.add_argument("--split", choices=("calibration", "holdout"), help="one split only")
    ap.add_argument("--adopt", action="store_true",
                    help="give new runs their split and record their labels' hashes, no scoring")
    args = ap.parse_args(argv)
    if args.adopt:
        print("\n".join(f"adopted {name}" for name in adopt()) or "nothing new")
        return 0
    results = run_all(args.split)
    if args.json:
        print(json.dumps({"all": summary(results), **figures(results)}, indent=2))
    else:
        print(report(results))
    if args.record:
        SCORES.write_text(json.dumps(figures(results), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
