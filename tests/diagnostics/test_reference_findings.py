"""Each reference run's whole diagnosis (severity, steps, evidence numbers, summary, actions)
equals the reviewed one in golden/reference_findings.json; see reference_runs.py for why and
how to regenerate it after an intended change."""

from __future__ import annotations

import json
import math

import pytest

from app.diagnostics import DiagnosticsState
from tests.diagnostics.reference_runs import GOLDEN, RUNS, diagnosis_of

EXPECTED = {  # the readable part of the golden file: what each run is about
    "healthy": ("healthy", set()),
    "too_easy": ("warning", {"zero_reward_spread"}),
    "too_hard": ("critical", {"zero_reward_spread", "stalled"}),
    "zero_spread_mixed": ("warning", {"zero_reward_spread", "stalled"}),
    "zero_spread_negative": ("critical", {"zero_reward_spread", "reward_collapse"}),
    "stalled": ("warning", {"stalled"}),
    "stalled_sparse": ("warning", {"stalled"}),
    # the run's reward keeps rising (healthy_cols): a warning, not critical (issue 54)
    "entropy_collapse": ("warning", {"entropy_collapse"}),
    "entropy_blowup": ("critical", {"entropy_blowup"}),
    "kl_blowup": ("critical", {"kl_blowup"}),
    "kl_spikes": ("warning", {"kl_spike"}),
    "kl_single_spike": ("healthy", {"kl_spike"}),
    "kl_offset": ("healthy", {"kl_offset"}),
    "kl_sudden_growth": ("critical", {"kl_blowup"}),  # sustained: severity.SUSTAINED
    "truncation": ("warning", {"truncation"}),  # cut from the start: not an explosion
    "length_to_cap": ("warning", {"length_explosion"}),
    "length_collapse": ("critical", {"length_collapse", "stalled"}),  # flat reward
    "hacking": ("warning", {"reward_hacking"}),
    "divergence": ("warning", {"train_test_divergence"}),
    "reward_collapse": ("critical", {"reward_collapse"}),  # a collapse is not a stall
    "nonfinite": ("critical", {"numerical_instability"}),
    "grad_spikes": ("warning", {"numerical_instability"}),
    "dead_component": ("healthy", {"dead_reward_component"}),
    "degenerate": ("warning", {"degenerate_completions"}),
}


def same(a: object, b: object, where: str = "") -> None:
    """Equal, floats to 1e-9 relative (the stored file went through JSON)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert sorted(a) == sorted(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_reference_run_is_stored(golden: dict) -> None:
    assert sorted(golden) == sorted(RUNS) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_reference_diagnosis(name: str, golden: dict) -> None:
    got = diagnosis_of(name)
    verdict, categories = EXPECTED[name]
    assert got["verdict"] == verdict
    assert {f["category"] for f in got["findings"]} == categories
    same(got, golden[name], name)


@pytest.mark.parametrize("name", ["hacking", "kl_spikes", "degenerate", "divergence",
                                  "length_collapse", "nonfinite"])
def test_batches_of_50_reach_the_stored_diagnosis(name: str, golden: dict) -> None:
    rows, context = RUNS[name]()
    st = DiagnosticsState.new(context)
    for i in range(0, len(rows), 50):
        st.update(rows[i:i + 50])
    got = json.loads(json.dumps(st.diagnosis.to_dict(), allow_nan=False))
    assert got["verdict"] == golden[name]["verdict"]
    # the same findings (their first steps may be earlier: a live run saw them sooner)
    assert sorted((f["category"], f["severity"], f["metric"]) for f in got["findings"]) == \
        sorted((f["category"], f["severity"], f["metric"]) for f in golden[name]["findings"])
