"""Every category fires on its pattern; a healthy run stays healthy."""

from __future__ import annotations

import numpy as np
import pytest

from app.diagnostics import RunContext, diagnose


def cats(d, min_sev="warning"):
    order = {"info": 0, "warning": 1, "critical": 2}
    return {f.category for f in d.findings if order[f.severity] >= order[min_sev]}


def finding(d, category):
    found = [f for f in d.findings if f.category == category]
    assert found, f"no {category} in {[(f.category, f.severity) for f in d.findings]}"
    return found[0]


@pytest.mark.parametrize("every,n_steps", [(1, 300), (5, 600), (10, 1000)])
def test_healthy_run_is_healthy(b, every, n_steps):
    d = diagnose(b.healthy_rows(n_steps, every))
    assert d.verdict == "healthy", [(f.category, f.severity, f.summary) for f in d.findings]
    assert not [f for f in d.findings if f.severity != "info"]


@pytest.mark.parametrize("seed", range(5))
def test_healthy_run_across_seeds(b, seed):
    assert diagnose(b.healthy_rows(400, 2, seed)).verdict == "healthy"


def test_zero_spread_too_easy(b):
    steps, c = b.healthy_cols(200, 5)
    rng = b.rng(1)
    c["frac_reward_zero_std"] = np.clip(0.9 + rng.normal(0, 0.04, len(steps)), 0, 1)
    c["reward"] = np.clip(0.92 + rng.normal(0, 0.03, len(steps)), 0, 1)
    d = diagnose(b.rows_from(steps, **c))
    f = finding(d, "zero_reward_spread")
    assert f.severity == "warning" and f.evidence["kind"] == "too_easy"
    assert "stalled" not in cats(d)  # saturated: no room to rise, reported once
    assert any("harder" in a for a in f.actions)


def test_zero_spread_too_hard(b):
    steps, c = b.healthy_cols(200, 1)
    rng = b.rng(2)
    c["frac_reward_zero_std"] = np.clip(0.97 + rng.normal(0, 0.01, len(steps)), 0, 1)
    c["reward"] = np.clip(0.03 + rng.normal(0, 0.01, len(steps)), 0, 1)
    f = finding(diagnose(b.rows_from(steps, **c)), "zero_reward_spread")
    assert f.severity == "critical" and f.evidence["kind"] == "too_hard"
    assert any("easier" in a for a in f.actions)


def test_stalled(b):
    steps, c = b.healthy_cols(300, 1)
    rng = b.rng(3)
    c["reward"] = 0.5 + rng.normal(0, 0.2, len(steps))
    f = finding(diagnose(b.rows_from(steps, **c)), "stalled")
    assert f.severity == "warning" and f.metric == "reward"


def test_stalled_after_early_format_gain_with_noise(b):
    """Small early gain (format) then a long noisy flat stretch: still stalled."""
    steps = np.arange(10, 501, 10)
    rng = b.rng(4)
    r = -3 * np.exp(-steps / 30) + rng.normal(0, 5, len(steps))
    assert "stalled" in cats(diagnose(b.rows_from(steps, reward=r)))


def test_entropy_collapse(b):
    steps, c = b.healthy_cols(300, 1)
    t = steps / 300
    c["entropy"] = np.where(t < 0.3, 0.9, 0.04) + b.rng(5).normal(0, 0.005, len(steps))
    f = finding(diagnose(b.rows_from(steps, **c)), "entropy_collapse")
    assert f.severity in ("warning", "critical") and 80 <= f.first_step <= 100


def test_entropy_blowup(b):
    steps, c = b.healthy_cols(300, 1)
    t = steps / 300
    c["entropy"] = 0.5 + 3.0 * np.clip((t - 0.3) * 3, 0, 1) + b.rng(6).normal(0, 0.05, len(steps))
    assert finding(diagnose(b.rows_from(steps, **c)), "entropy_blowup").severity != "info"


def test_kl_blowup(b):
    steps, c = b.healthy_cols(400, 1)
    t = steps / 400
    c["kl"] = 0.01 * np.exp(7 * t) + np.abs(b.rng(7).normal(0, 0.005, len(steps)))
    f = finding(diagnose(b.rows_from(steps, **c)), "kl_blowup")
    assert f.severity in ("warning", "critical") and f.metric == "kl"


def test_repeated_kl_spikes_warn(b):
    steps, c = b.healthy_cols(400, 1)
    kl = c["kl"].copy()
    for s in (50, 150, 260, 350):
        kl[s] = 80.0
    d = diagnose(b.rows_from(steps, **{**c, "kl": kl}))
    f = finding(d, "kl_spike")
    assert f.severity == "warning" and f.evidence["spike_count"] == 4
    assert "kl_blowup" not in cats(d)


def test_single_kl_spike_is_not_a_warning(b):
    steps, c = b.healthy_cols(400, 1)
    kl = c["kl"].copy()
    kl[200] = 150.0
    d = diagnose(b.rows_from(steps, **{**c, "kl": kl}))
    assert d.verdict == "healthy"
    assert finding(d, "kl_spike").severity == "info"


def test_kl_constant_from_step_one_is_info_at_most(b):
    steps, c = b.healthy_cols(200, 1)
    c["kl"] = 1.0 + b.rng(8).normal(0, 0.15, len(steps))
    d = diagnose(b.rows_from(steps, **c))
    assert d.verdict == "healthy"
    assert finding(d, "kl_offset").severity == "info"


def test_kl_missing_or_zero_gives_no_kl_finding(b):
    steps, c = b.healthy_cols(200, 1)
    c.pop("kl")
    assert diagnose(b.rows_from(steps, **c)).verdict == "healthy"
    c["kl"] = np.zeros(len(steps))
    d = diagnose(b.rows_from(steps, **c))
    assert d.verdict == "healthy" and not any(f.category.startswith("kl") for f in d.findings)


def test_truncation_without_growth_is_its_own_category(b):
    """Completions cut at the cap from the start, length flat: truncation (raise the cap),
    not a length explosion, which needs growth (issue 23)."""
    steps, c = b.healthy_cols(200, 10)
    c["completions/clipped_ratio"] = np.clip(0.9 + b.rng(9).normal(0, 0.04, len(steps)), 0, 1)
    d = diagnose(b.rows_from(steps, **c))
    f = finding(d, "truncation")
    assert f.severity == "warning" and f.metric == "completions/clipped_ratio"
    assert "length_explosion" not in d.categories
    assert any("Raise max_completion_length" in a for a in f.actions)


def test_truncation_after_growth_is_truncation_beside_the_explosion(b):
    """Lengths that grew into the cap: the growth is a length explosion and the share cut at
    the cap is truncation, each its own finding (issue 54: the share used to be folded into
    the explosion and never shown)."""
    steps, c = b.healthy_cols(200, 10)
    t = steps / 200
    c["completions/mean_length"] = 150 + 650 * t + b.rng(11).normal(0, 10, len(steps))
    c["completions/clipped_ratio"] = np.clip(1.2 * t - 0.1, 0, 1)
    d = diagnose(b.rows_from(steps, **c), RunContext(max_completion_length=800))
    cut = finding(d, "truncation")
    assert cut.metric == "completions/clipped_ratio" and cut.evidence["length_grew"] is True
    assert finding(d, "length_explosion").metric == "completions/mean_length"


def test_length_explosion_climbing_to_cap(b):
    steps, c = b.healthy_cols(300, 1)
    t = steps / 300
    c["completions/mean_length"] = 200 + 700 * t + b.rng(10).normal(0, 15, len(steps))
    c.pop("completions/clipped_ratio")
    d = diagnose(b.rows_from(steps, **c), RunContext(max_completion_length=1024))
    f = finding(d, "length_explosion")
    assert f.severity == "warning" and f.metric == "completions/mean_length"


def test_length_collapse(b):
    steps, c = b.healthy_cols(300, 1)
    rng = b.rng(11)
    t = steps / 300
    c["reward"] = 0.5 + rng.normal(0, 0.1, len(steps))
    c["completions/mean_length"] = np.where(t < 0.4, 300, 6) + rng.normal(0, 1, len(steps))
    assert finding(diagnose(b.rows_from(steps, **c)), "length_collapse").severity != "info"


def test_benign_length_drop_while_reward_rises(b):
    steps, c = b.healthy_cols(300, 1)
    t = steps / 300
    c["completions/mean_length"] = 800 - 680 * np.clip(t * 2, 0, 1) + b.rng(12).normal(0, 10, len(steps))
    d = diagnose(b.rows_from(steps, **c))
    assert d.verdict == "healthy", [(f.category, f.severity) for f in d.findings]


def test_reward_hacking(b):
    steps, c = b.healthy_cols(300, 1)
    rng = b.rng(13)
    t = steps / 300
    c["rewards/format/mean"] = 0.1 + 0.85 * t + rng.normal(0, 0.04, len(steps))
    c["rewards/accuracy/mean"] = 0.6 - 0.4 * t + rng.normal(0, 0.05, len(steps))
    c["reward"] = c["rewards/format/mean"] + c["rewards/accuracy/mean"]
    f = finding(diagnose(b.rows_from(steps, **c)), "reward_hacking")
    assert f.severity == "warning" and f.metric == "rewards/accuracy/mean"
    assert "format" in f.evidence["rising"]


def test_train_test_divergence(b):
    steps, c = b.healthy_cols(300, 1)
    ev = np.full(len(steps), None, dtype=object)
    idx = np.arange(19, 300, 20)
    ev[idx] = 0.8 - 0.5 * (steps[idx] / 300) + b.rng(14).normal(0, 0.03, len(idx))
    f = finding(diagnose(b.rows_from(steps, **c, eval_reward=ev)), "train_test_divergence")
    assert f.severity == "warning" and f.metric == "eval_reward"


def test_eval_following_noisy_train_is_not_divergence(b):
    steps = np.arange(1, 161)
    rng = b.rng(15)
    r = -0.5 + rng.normal(0, 0.8, len(steps))
    ev = np.full(len(steps), None, dtype=object)
    idx = np.arange(19, 160, 20)
    ev[idx] = -0.3 + rng.normal(0, 0.2, len(idx))
    d = diagnose(b.rows_from(steps, reward=r, eval_reward=ev))
    assert "train_test_divergence" not in {f.category for f in d.findings}


def test_reward_collapse(b):
    steps, c = b.healthy_cols(400, 1)
    t = steps / 400
    rng = b.rng(16)
    c["reward"] = np.where(t < 0.6, 0.2 + 1.5 * t / 0.6, 0.3) + rng.normal(0, 0.05, len(steps))
    f = finding(diagnose(b.rows_from(steps, **c)), "reward_collapse")
    assert f.severity in ("warning", "critical") and 200 <= f.first_step <= 260


@pytest.mark.parametrize("value", [float("nan"), "nan", "inf", float("-inf")])
def test_nonfinite_loss_is_critical(b, value):
    steps, c = b.healthy_cols(100, 1)
    loss = list(c["loss"])
    loss[60] = value
    d = diagnose(b.rows_from(steps, **{**c, "loss": loss}))
    f = finding(d, "numerical_instability")
    assert d.verdict == "critical" and f.first_step == 61 and f.metric == "loss"


def test_grad_norm_spikes(b):
    steps, c = b.healthy_cols(300, 1)
    g = c["grad_norm"].copy()
    g[[40, 120, 200]] = 60.0
    assert finding(diagnose(b.rows_from(steps, **{**c, "grad_norm": g})),
                   "numerical_instability").severity == "warning"
    g = c["grad_norm"].copy()
    g[150] = 60.0
    d = diagnose(b.rows_from(steps, **{**c, "grad_norm": g}))
    assert d.verdict == "healthy" and finding(d, "numerical_instability").severity == "info"


def test_dead_component_is_info_only(b):
    steps, c = b.healthy_cols(250, 10)
    c["rewards/strict_format/mean"] = np.zeros(len(steps))
    d = diagnose(b.rows_from(steps, **c))
    assert d.verdict == "healthy"
    f = finding(d, "dead_reward_component")
    assert f.severity == "info" and f.metric == "rewards/strict_format/mean"


def test_loss_near_zero_is_never_flagged(b):
    steps, c = b.healthy_cols(300, 1)
    c["loss"] = np.zeros(len(steps))
    assert diagnose(b.rows_from(steps, **c)).verdict == "healthy"


def test_lost_live_run(b):
    rows = b.healthy_rows(100, 1)
    rows = [(s, {**d, "step_time": 10.0}) for s, d in rows]
    ctx = RunContext(is_live=True, now=10_000.0, last_report_at=10_000.0 - 3600)
    f = finding(diagnose(rows, ctx), "lost")
    assert f.severity == "critical" and f.last_step == 100
    ctx = RunContext(is_live=True, now=10_000.0, last_report_at=10_000.0 - 30)
    assert diagnose(rows, ctx).verdict == "healthy"
    ctx = RunContext(is_live=False, now=10_000.0, last_report_at=0.0)
    assert diagnose(rows, ctx).verdict == "healthy"


def test_lost_uses_context_step_time_and_warns(b):
    rows = b.healthy_rows(100, 5)
    ctx = RunContext(is_live=True, now=1000.0, last_report_at=1000.0 - 400, seconds_per_step=10)
    assert finding(diagnose(rows, ctx), "lost").severity == "warning"  # 400 s vs 50 s/report


@pytest.mark.parametrize("n", [1, 2, 3])
def test_short_runs_do_not_crash_or_alarm(b, n):
    d = diagnose(b.healthy_rows(300, 1)[:n])
    assert d.verdict == "healthy" and not d.findings


def test_a_run_with_no_rows_is_unknown_not_healthy():
    """Nothing read is nothing checked: an empty log must never get a clean bill of health."""
    d = diagnose([])
    assert d.verdict == "unknown" and not d.findings


def test_short_run_alarms_only_on_its_exact_signal(b):
    """Three rows: a KL jump is noise (no window yet), but no group with any reward spread on
    every row is exact, judged at once (issue 23: a smoke run must catch it)."""
    rows = [(1, {"reward": 0.0, "loss": 0.0, "kl": 1.0, "frac_reward_zero_std": 1.0}),
            (2, {"reward": 0.0, "loss": 0.0, "kl": 50.0, "frac_reward_zero_std": 1.0}),
            (3, {"reward": 0.0, "loss": 0.0, "kl": 1.0, "frac_reward_zero_std": 1.0})]
    d = diagnose(rows)
    assert [(f.category, f.severity) for f in d.findings] == [("zero_reward_spread", "critical")]
    rows = [(s, {**m, "frac_reward_zero_std": 0.5}) for s, m in rows]
    assert diagnose(rows).verdict == "healthy"


def test_old_and_new_key_names_agree(b):
    steps, c = b.healthy_cols(300, 5)
    c["completions/clipped_ratio"] = np.full(len(steps), 0.9)
    new = b.rows_from(steps, **c)
    old_cols = {("completion_length" if k == "completions/mean_length" else
                 "clipped_ratio" if k == "completions/clipped_ratio" else
                 k[:-5] if k.startswith("rewards/") else k): v for k, v in c.items()}
    old = b.rows_from(steps, **old_cols)
    dn, do = diagnose(new), diagnose(old)
    assert dn.verdict == do.verdict == "warning"
    assert dn.categories == do.categories == ["truncation"]


def test_new_length_name_wins_when_both_present(b):
    steps, c = b.healthy_cols(300, 1)
    c["completion_length"] = 300 + 3000 * (steps / 300)  # old key explodes, new one is sane
    d = diagnose(b.rows_from(steps, **c))
    assert d.verdict == "healthy"


def test_kl_sudden_sustained_growth_is_a_blowup_not_a_spike_episode(b):
    """A flat KL that turns exponential halfway: the long elevated stretch must reach the
    level series (one-shot import sees it in a single chunk), not hide as a spike episode."""
    steps = np.arange(1, 201)
    kl = np.where(steps < 100, 0.02, 0.02 * np.exp((steps - 100) / 15))
    rows = b.rows_from(steps, kl=kl, reward=0.5 + 0.001 * steps, loss=np.full(200, 0.01))
    d = diagnose(rows)
    f = finding(d, "kl_blowup")
    assert f.severity in ("warning", "critical") and f.first_step >= 100
    assert "kl_spike" not in cats(d)
