"""Rollout signals from hand-made groups, and the degenerate-completions detector they feed."""

from __future__ import annotations

import numpy as np
import pytest

from app.diagnostics import diagnose
from app.diagnostics.state import DiagnosticsState
from app.rollouts.signals import group_outcome, repetition, step_signals
from grpodeck.contract.text import render_messages

REP, IDENT, EMPTY = "rollouts/repetition", "rollouts/identical_group_frac", "rollouts/empty_frac"


def group(*texts: str, totals: list | None = None) -> dict:
    totals = totals if totals is not None else [0.0] * len(texts)
    return {"index": 0, "prompt": "p",
            "completions": [{"text": t, "total": r} for t, r in zip(texts, totals, strict=True)]}


# -- signals -----------------------------------------------------------------------------------
def test_repetition_of_single_completions() -> None:
    assert repetition("the quick brown fox jumps over the lazy dog") == 0.0
    assert repetition("go go go go go go go go go go go go") == pytest.approx(1 - 1 / 10)
    assert repetition("a b c a b c a b c") == pytest.approx(1 - 3 / 7)
    assert repetition("hi there") == 0.0  # too short to judge
    assert repetition("!!!!!!!!!!!!") == pytest.approx(1 - 1 / 9)  # no spaces: char 4-grams
    assert repetition("Paris.") == 0.0


def test_step_signals() -> None:
    groups = [group("same answer", " same answer ", "same answer"),
              group("one two three", "", "   "),
              group("loop loop loop loop loop", "x y z w", "a b c d")]
    s = step_signals(groups)
    assert s[IDENT] == pytest.approx(1 / 3)  # whitespace around the text does not count
    assert s[EMPTY] == pytest.approx(2 / 9)
    # mean over the 7 non-empty completions; only "loop x5" repeats (1 - 1/3)
    assert s[REP] == pytest.approx((1 - 1 / 3) / 7)
    assert step_signals([]) == {}
    assert step_signals([group("", "")])[IDENT] == 1.0  # all-empty group: identical and empty
    assert step_signals([group("", "")])[REP] == 0.0


def test_group_outcome() -> None:
    assert group_outcome(group("a", "b", totals=[1.0, 1.0])) == "all_pass"
    assert group_outcome(group("a", "b", totals=[0.0, 0.0])) == "all_fail"
    assert group_outcome(group("a", "b", totals=[-0.5, -0.5])) == "all_fail"
    assert group_outcome(group("a", "b", totals=[0.0, 1.0])) == "mixed"
    assert group_outcome(group("a", "b", totals=[None, None])) == "all_fail"
    assert group_outcome(group("a", "b", totals=[None, 2.0])) == "all_pass"


def test_render_messages() -> None:
    msgs = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What?"}]}]
    assert render_messages(msgs) == "system: Be brief.\nuser: What?"
    assert render_messages([{"role": "assistant", "content": "42"}], roles=False) == "42"
    assert render_messages(np.array(msgs, dtype=object)) == "system: Be brief.\nuser: What?"
    assert render_messages("plain") == "plain" and render_messages(None) == ""


# -- detector ----------------------------------------------------------------------------------
EVERY = 10  # rollouts captured every 10th step of a 300-step run


def with_signals(b, rep, ident, empty, n_steps: int = 300) -> list[tuple[int, dict]]:
    """The healthy synthetic run plus rollout signals at captured steps (one value per point)."""
    rows = b.healthy_rows(n_steps)
    captured = [(s, m) for s, m in rows if s % EVERY == 0]
    for (_, m), r, i, e in zip(captured, rep, ident, empty, strict=True):
        m.update({REP: float(r), IDENT: float(i), EMPTY: float(e)})
    return rows


def healthy_signals(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.clip(0.05 + rng.normal(0, 0.03, n), 0, 1), rng.choice([0.0, 0.25], n),
            np.clip(rng.normal(0.01, 0.01, n), 0, 1))


def degenerate(d) -> dict[str, str]:
    return {f.metric: f.severity for f in d.findings if f.category == "degenerate_completions"}


def test_healthy_signals_stay_quiet(b) -> None:
    rep, ident, empty = healthy_signals(b.rng(1), 30)
    d = diagnose(with_signals(b, rep, ident, empty))
    assert d.verdict == "healthy" and degenerate(d) == {}


def test_repetitive_completions_are_flagged(b) -> None:
    rep, ident, empty = healthy_signals(b.rng(2), 30)
    rep[15:] = np.linspace(0.6, 0.9, 15)
    d = diagnose(with_signals(b, rep, ident, empty))
    assert degenerate(d) == {REP: "warning"}
    f = next(f for f in d.findings if f.metric == REP)
    assert 140 <= f.first_step <= 170 and f.last_step == 300
    assert f.evidence["repetition_median"] >= 0.8
    assert any("temperature" in a for a in f.actions) and any("rollouts" in a for a in f.actions)


def test_identical_groups_are_flagged(b) -> None:
    rep, ident, empty = healthy_signals(b.rng(3), 30)
    ident[20:] = 1.0
    assert degenerate(diagnose(with_signals(b, rep, ident, empty))) == {IDENT: "warning"}


@pytest.mark.parametrize("level, severity", [(0.5, "warning"), (1.0, "critical")])
def test_empty_completions_are_flagged(b, level: float, severity: str) -> None:
    rep, ident, empty = healthy_signals(b.rng(4), 30)
    empty[18:] = level
    d = diagnose(with_signals(b, rep, ident, empty))
    assert degenerate(d) == {EMPTY: severity}
    assert d.verdict == severity


def test_short_or_transient_episodes_stay_quiet(b) -> None:
    rep, ident, empty = healthy_signals(b.rng(5), 30)
    empty[-3:] = 1.0  # only three captured points so far
    rep[10:13] = 0.9  # an episode that recovered
    assert degenerate(diagnose(with_signals(b, rep, ident, empty))) == {}
    short = [(s * EVERY, {REP: 0.9, EMPTY: 1.0, IDENT: 1.0}) for s in range(1, 4)]
    assert degenerate(diagnose(short)) == {}


def test_incremental_updates_see_the_same(b) -> None:
    rep, ident, empty = healthy_signals(b.rng(6), 30)
    empty[15:] = 0.95
    rows = with_signals(b, rep, ident, empty)
    state = DiagnosticsState.new()
    for i in range(0, len(rows), 25):
        state.update(rows[i:i + 25])
    state = DiagnosticsState.from_json(state.to_json())
    assert degenerate(state.update([])) == degenerate(diagnose(rows)) == {EMPTY: "critical"}
