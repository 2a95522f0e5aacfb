"""Settings fixes ("Try this fix"): each category's change, declared next to its detector,
clamped to the launch form's ranges, the batch kept whole, and the GRPOConfig line for a run
trained by the user's own script."""

from __future__ import annotations

import pytest

from app.diagnostics import detectors
from app.diagnostics.fixes import TRL_DEFAULTS, propose
from grpodeck.contract.spec import RunSpec

SPEC = RunSpec().model_dump(mode="json")  # what a launched run's spec holds


def changes(category: str, **settings: object) -> dict[str, tuple[object, object]]:
    found = propose(category, {**SPEC, **settings})
    assert found is not None, f"no fix for {category}"
    return {c.key: (c.old, c.new) for c in found.changes}


def test_zero_spread_doubles_the_group() -> None:
    assert changes("zero_reward_spread", num_generations=4) == {"num_generations": (4, 8)}


def test_kl_blowup_raises_beta() -> None:
    assert changes("kl_blowup", beta=0.04) == {"beta": (0.04, 0.08)}


def test_kl_blowup_without_a_penalty_lowers_the_learning_rate() -> None:
    assert changes("kl_blowup", beta=0.0, learning_rate=1e-5) == {"learning_rate": (1e-5, 5e-6)}


def test_truncation_doubles_the_room() -> None:
    assert changes("truncation", max_completion_length=32) == {"max_completion_length": (32, 64)}


def test_entropy_collapse_lowers_the_learning_rate() -> None:
    assert changes("entropy_collapse", learning_rate=2e-5) == {"learning_rate": (2e-5, 1e-5)}


def test_length_explosion_adds_the_overlong_penalty_at_the_runs_cap() -> None:
    found = propose("length_explosion", SPEC)
    assert found is not None
    (change,) = found.changes
    assert change.key == "rewards" and change.old == SPEC["rewards"]
    assert change.new == [*SPEC["rewards"], {"name": "overlong_penalty", "weight": 1.0,
                                             "params": {"max_length": 0, "soft_share": 0.2}}]
    assert change.after == "length_target ×1.0, overlong_penalty ×1.0"
    RunSpec.model_validate(found.apply(SPEC))


def test_a_run_that_has_the_penalty_gets_no_length_fix() -> None:
    penalised = propose("length_explosion", SPEC).apply(SPEC)  # type: ignore[union-attr]
    assert propose("length_explosion", penalised) is None


def test_an_outside_run_gets_trls_penalty_line_for_its_cap() -> None:
    found = propose("length_explosion", {"max_completion_length": 1000})
    assert found is not None and found.grpo_config() == (
        "reward_funcs.append(get_soft_overlong_punishment(max_completion_len=1000, "
        "soft_punish_cache=200))")
    assert "<your max_completion_length>" in propose("length_explosion", {}).grpo_config()  # type: ignore[union-attr]


@pytest.mark.parametrize("category", ["stalled", "reward_hacking", "lost"])
def test_categories_without_a_settings_remedy_offer_none(category: str) -> None:
    assert propose(category, SPEC) is None


def test_a_fix_is_declared_by_the_module_of_its_detector() -> None:
    from app.diagnostics.detectors import entropy, kl, length, zero_spread

    assert detectors.FIXES == {**zero_spread.FIXES, **kl.FIXES, **length.FIXES, **entropy.FIXES}


def test_clamped_to_the_forms_range() -> None:
    assert changes("zero_reward_spread", num_generations=48) == {"num_generations": (48, 64)}
    assert changes("truncation", max_completion_length=30_000) == {
        "max_completion_length": (30_000, 32_768)}
    assert changes("kl_blowup", beta=8.0) == {"beta": (8.0, 10.0)}


def test_a_setting_at_its_bound_falls_through_or_offers_nothing() -> None:
    assert propose("zero_reward_spread", {**SPEC, "num_generations": 64}) is None
    assert changes("kl_blowup", beta=10.0, learning_rate=1e-5) == {"learning_rate": (1e-5, 5e-6)}


def test_the_fixed_spec_validates() -> None:
    for category, settings in [("zero_reward_spread", {"num_generations": 48}),
                               ("truncation", {"max_completion_length": 30_000}),
                               ("kl_blowup", {"beta": 0.0, "learning_rate": 1e-9})]:
        spec = {**SPEC, **settings}
        RunSpec.model_validate(propose(category, spec).apply(spec))  # type: ignore[union-attr]


def test_a_larger_group_keeps_the_batch_whole() -> None:
    assert changes("zero_reward_spread", num_generations=6, per_device_train_batch_size=18) == {
        "num_generations": (6, 12), "per_device_train_batch_size": (18, 24)}
    assert changes("zero_reward_spread", num_generations=4, per_device_train_batch_size=16) == {
        "num_generations": (4, 8)}


def test_an_outside_run_gets_a_grpo_config_line() -> None:
    found = propose("zero_reward_spread", {"num_generations": 8})
    assert found is not None and found.grpo_config() == "GRPOConfig(num_generations=16)"


def test_an_unreported_setting_starts_from_trls_default_and_says_so() -> None:
    found = propose("truncation", {})
    assert found is not None
    (change,) = found.changes
    assert (change.old, change.new, change.assumed) == (
        TRL_DEFAULTS["max_completion_length"], 1024, True)
    assert found.grpo_config() == "GRPOConfig(max_completion_length=1024)"
