"""A finding's one line on the run page: its key number in words, from the evidence the real
detectors report (tests/diagnostics/reference_runs.py), and evidence values in words."""

from __future__ import annotations

import pytest

from app.diagnostics import diagnose
from app.health.headline import KEY_NUMBERS, key_number, plain
from tests.diagnostics import reference_runs

CASES = [("kl_blowup", "kl_blowup", "KL "), ("too_hard", "zero_reward_spread", "% of groups"),
         ("entropy_collapse", "entropy_collapse", "entropy "), ("stalled", "stalled", "reward "),
         ("truncation", "truncation", "% of completions clipped"),
         ("length_to_cap", "length_explosion", "mean length "),
         ("grad_spikes", "numerical_instability", "gradient-norm spikes"),
         ("reward_collapse", "reward_collapse", "reward ")]


@pytest.mark.parametrize(("run", "category", "words"), CASES)
def test_key_number_from_a_detectors_evidence(run: str, category: str, words: str) -> None:
    rows, context = getattr(reference_runs, run)()
    finding = next(f for f in diagnose(rows, context).findings if f.category == category)
    line = key_number(category, finding.evidence)
    assert line is not None and words in line
    assert "rho" not in line and "sigma" not in line


def test_numbers_read_short_and_unknown_evidence_has_no_line() -> None:
    assert key_number("kl_blowup", {"recent_kl": 5.651234, "growth_factor": 439.61}) == (
        "KL 5.65, 440× its start")
    assert key_number("kl_blowup", {}) is None and key_number("no_such", {"x": 1.0}) is None
    assert {category for _, category, _ in CASES} <= set(KEY_NUMBERS)


def test_evidence_values_in_words() -> None:
    assert plain(True) == "yes" and plain(False) == "no" and plain(None) == "—"
    assert plain([[40, 60.0], [120, 60.0]]) == "40, 60, 120, 60"
    assert plain({"a": 0.123456}) == "a: 0.1235"
