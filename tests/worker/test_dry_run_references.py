"""A dry run scores the dataset's reference answers with every reward: a correct answer must
get the reward's top score, or the reward is broken before any sampling can tell."""

from __future__ import annotations

from app.dryruns.analysis import analyse
from grpodeck.contract.spec import RunSpec
from worker.dry_run import reward_keys, score_references

ROWS = [{"prompt": [{"role": "user", "content": f"What is {a} + {b}?"}], "answer": str(a + b)}
        for a, b in ((1, 2), (30, 12), (7, 7))]


def test_reference_answers_are_scored_by_every_reward() -> None:
    spec = RunSpec(model="builtin:tiny-random", dataset="builtin:arithmetic", rewards=[
        {"name": "exact_answer"}, {"name": "format_tag", "params": {"tag": "answer"}},
        {"name": "length_target", "params": {"target": 2}},
        {"name": "length_target", "params": {"target": 1}}])
    reference = score_references(spec, ROWS)
    assert reference is not None and reference["column"] == "answer"
    assert reference["rewards"]["exact_answer"] == [1.0, 1.0, 1.0]
    assert reference["rewards"]["format_tag"] == [0.0, 0.0, 0.0]
    assert reference["rewards"]["length_target"] == [-0.5, 0.0, 0.0]
    assert reference["rewards"]["length_target#2"] == [0.0, -1.0, -1.0]
    result = analyse({"weights": {"exact_answer": 1.0}, "groups": [], "reference": reference})
    assert result["reference"]["rewards"]["exact_answer"]["mean"] == 1.0


def test_no_reference_column_no_reference_scores() -> None:
    spec = RunSpec(model="builtin:tiny-random")
    assert score_references(spec, [{"prompt": "hi"}]) is None
    assert reward_keys(["a", "b", "a", "a"]) == ["a", "b", "a#2", "a#3"]
