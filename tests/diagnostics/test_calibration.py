"""The calibration corpus (``tests/corpus/``): real public GRPO-family runs, each labelled
before the Deck saw it, scored by the harness ``make calibrate`` runs (``tools/calibrate.py``).

Why in the suite: a detector change that helps the synthetic patterns can hurt real logs nobody
here wrote; the suite fails when the share of corpus runs read as their label says drops below
the figure last recorded in ``scores.json`` (``python -m tools.calibrate --record`` after an
intended improvement), on the tuning split and on the held-out one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tools import calibrate

EXCLUDED = Path(__file__).resolve().parents[3] / "shared" / "data" / "corpus-exclude.txt"
CATEGORIES = {"zero_reward_spread", "stalled", "entropy_collapse", "entropy_blowup", "kl_blowup",
              "kl_spike", "length_explosion", "length_collapse", "truncation",
              "numerical_instability", "reward_collapse", "reward_hacking",
              "train_test_divergence", "dead_reward_component", "no_reward_signal"}


def _runs() -> list[Path]:
    return sorted(p for p in calibrate.RUNS.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def results() -> list[calibrate.Result]:
    return calibrate.run_all()


def test_the_corpus_is_large_and_varied_enough() -> None:
    """At least 40 runs from at least 15 repositories, at most 3 runs a repository."""
    repos = [json.loads((d / "source.json").read_text())["repository"] for d in _runs()]
    assert len(repos) >= 40
    assert len(set(repos)) >= 15
    assert max(repos.count(r) for r in set(repos)) <= 3


def test_every_run_has_its_source_and_a_well_formed_label() -> None:
    for d in _runs():
        src = json.loads((d / "source.json").read_text())
        assert src["repository"].count("/") == 1 and len(src["commit"]) == 40, d.name
        assert src["path"], d.name
        label = json.loads((d / "label.json").read_text())
        assert set(label["verdict"]) <= {"healthy", "warning", "critical"}, d.name
        assert {c for g in label["need"] for c in g} <= CATEGORIES, d.name
        assert set(label["forbid"]) <= CATEGORIES, d.name
        assert label["split"] in ("calibration", "holdout"), d.name
        assert label["onset"] is None or isinstance(label["onset"], int), d.name
        assert (d / "figures.jsonl").exists() or (d / "figures.jsonl.gz").exists(), d.name


def test_no_run_comes_from_a_repository_kept_apart() -> None:
    if not EXCLUDED.exists():  # the shared folder is beside the checkout on these machines
        pytest.fail(f"{EXCLUDED} is missing: cannot check the corpus against it")
    kept_apart = {line.strip().lower() for line in EXCLUDED.read_text().splitlines()
                  if line.strip() and not line.startswith("#")}
    for d in _runs():
        repo = json.loads((d / "source.json").read_text())["repository"].lower()
        assert repo not in kept_apart, d.name


def test_labels_are_the_ones_written_before_scoring() -> None:
    """Each label's hash as first written is in ``labels.sha256``; a label changed since must
    say why in its note (``changed:``), or it measures nothing."""
    recorded = dict(line.split("  ")[::-1] for line in
                    (calibrate.CORPUS / "labels.sha256").read_text().splitlines() if line)
    for d in _runs():
        label = d / "label.json"
        key = f"runs/{d.name}/label.json"
        assert key in recorded, f"{key} has no recorded hash"
        digest = hashlib.sha256(label.read_bytes()).hexdigest()
        assert digest == recorded[key] or "changed:" in json.loads(label.read_text())["note"], key


def test_accuracy_does_not_drop_below_the_recorded_figure(results) -> None:
    recorded = json.loads(calibrate.SCORES.read_text())
    now = calibrate.figures(results)
    for split in ("calibration", "holdout"):
        assert now[split]["passed"] >= recorded[split]["passed"], (
            split, now[split], recorded[split],
            [(r.slug, r.problems) for r in results if r.split == split and r.problems])


def test_a_refused_log_is_a_failed_run_not_a_crash(tmp_path) -> None:
    run = tmp_path / "broken"
    run.mkdir()
    (run / "figures.jsonl").write_text("not json at all\n")
    (run / "source.json").write_text(json.dumps({"context": {}}))
    (run / "label.json").write_text(json.dumps({"verdict": ["healthy"], "need": [],
                                                "forbid": [], "need_read": ["reward"],
                                                "onset": None, "split": "calibration"}))
    r = calibrate.run_one(run, tmp_path)
    assert not r.passed and r.verdict == "error"


def test_scoring_follows_the_label() -> None:
    label = calibrate.Label(["warning"], [["stalled", "zero_reward_spread"]], ["kl_spike"],
                            ["reward"], 10, "calibration")
    assert calibrate.score(label, "warning", {"stalled"}, {"reward"}) == []
    assert calibrate.score(label, "healthy", {"stalled"}, {"reward"})  # verdict
    assert calibrate.score(label, "warning", {"kl_blowup"}, {"reward"})  # need
    assert calibrate.score(label, "warning", {"stalled", "kl_spike"}, {"reward"})  # forbid
    assert calibrate.score(label, "warning", {"stalled"}, {"kl"})  # need_read
