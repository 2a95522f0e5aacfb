"""Runs trained to fail on purpose with the real worker (tiny model, CPU; regenerate with
``python bench/failing_runs.py``): each fixture is diagnosed with the failure it was made for,
one-shot and fed live one step at a time."""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path

import pytest

from app.diagnostics import Diagnosis, DiagnosticsState, RunContext, diagnose
from app.diagnostics.model import severity_rank

FIXTURES = Path(__file__).parent / "fixtures" / "failing_runs"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def load(name: str) -> tuple[list[tuple[int, dict]], RunContext, list[list[str]]]:
    lines = (FIXTURES / f"{name}.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    rows = [(r["step"], r["metrics"]) for r in map(json.loads, lines[1:])]
    ctx = RunContext(max_completion_length=head["spec"]["max_completion_length"],
                     beta=head["spec"].get("beta"))
    return rows, ctx, head["expect"]


def check(d: Diagnosis, expect: list[list[str]]) -> None:
    worst = {}
    for f in d.findings:
        worst[f.category] = max(worst.get(f.category, 0), severity_rank(f.severity))
    for category, severity in expect:
        assert worst.get(category, -1) >= severity_rank(severity), (
            category, [(f.category, f.severity) for f in d.findings])
    assert "internal_error" not in worst


def test_every_failure_has_a_fixture() -> None:
    assert NAMES == ["constant_reward", "impossible_reward", "learning_rate_too_high",
                     "short_completions"]


@pytest.mark.parametrize("name", NAMES)
def test_a_trained_failure_is_diagnosed_as_intended(name: str) -> None:
    rows, ctx, expect = load(name)
    check(diagnose(rows, ctx), expect)


@pytest.mark.parametrize("name", NAMES)
def test_fed_live_it_reaches_the_same_findings(name: str) -> None:
    rows, ctx, expect = load(name)
    st = DiagnosticsState.new(ctx)
    for _, group in groupby(rows, key=lambda r: r[0]):
        d = st.update(list(group))
    check(d, expect)
