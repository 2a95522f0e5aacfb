"""Patterns that real logs nobody here had seen showed the detectors getting wrong (issue 54),
each as a synthetic run: a divergence where eval stays flat, a short run that must not pass
silently, spikes and collapses judged against the run's own scale, truncation reported whatever
the length did, a loss that blows up without a grad norm, a reward that never varies, and ties
at 0 that are not "too easy". Each failed on the main of 2026-12-06."""

from __future__ import annotations

import numpy as np

from app.diagnostics import diagnose
from app.diagnostics.model import Finding, severity_rank
from tests.diagnostics.conftest import healthy_cols, rows_from, sigmoid


def _raised(findings: list[Finding]) -> dict[str, Finding]:
    return {f.category: f for f in findings if severity_rank(f.severity) >= severity_rank("warning")}


def _rise(n: int, start: float, end: float, centre: float, seed: int, noise: float):
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    return steps, start + (end - start) * sigmoid((steps / n - centre) * 12) + rng.normal(0, noise, n)


def _with_eval(train_steps, train, eval_steps, evals, **extra) -> list[tuple[int, dict]]:
    rows = {int(s): {"reward": float(v)} for s, v in zip(train_steps, train)}
    for s, v in zip(eval_steps, evals):
        rows[int(s)]["eval_reward"] = float(v)
    for name, col in extra.items():
        for s, v in zip(train_steps, col):
            rows[int(s)][name] = float(v)
    return sorted(rows.items())


# ---- train/eval divergence: the gap widening beyond noise --------------------------------

def test_eval_flat_at_zero_while_train_rises_is_divergence():
    """Train reward 8% -> 80% while the held-out accuracy stays at 0% (reward hacking by the
    author's own account): the rule used to wait for eval to fall."""
    steps, train = _rise(200, 0.08, 0.80, 0.5, 1, 0.03)
    ev_steps = np.arange(10, 201, 20)
    found = _raised(diagnose(_with_eval(steps, train, ev_steps, np.zeros(len(ev_steps)))).findings)
    f = found["train_test_divergence"]
    # the range starts where the gap starts to grow: where train leaves its early level
    assert 40 <= f.first_step <= 110, f.first_step


def test_divergence_range_starts_at_the_eval_peak_not_at_the_first_eval():
    """Eval rises with train up to step 100, then falls while train keeps rising: the gap grows
    from the peak on, so the range must not start at step 10 while eval was still rising."""
    steps = np.arange(1, 301)
    rng = np.random.default_rng(2)
    train = 0.2 + 0.6 * steps / 300 + rng.normal(0, 0.02, 300)
    ev_steps = np.arange(10, 301, 15)
    evals = np.where(ev_steps <= 100, 0.3 + 0.3 * ev_steps / 100, 0.6 - 0.3 * (ev_steps - 100) / 200)
    f = _raised(diagnose(_with_eval(steps, train, ev_steps, evals)).findings)["train_test_divergence"]
    assert 80 <= f.first_step <= 130, f.first_step


def test_eval_falling_without_a_significant_trend_while_train_rises_is_divergence():
    """Five noisy eval points that drift down without a significant rank trend next to a
    train reward that doubles: eval does not follow, the gap widens (a flipped sign in the
    rule's eval test misses this)."""
    steps, train = _rise(100, 0.3, 0.8, 0.5, 3, 0.02)
    ev_steps = np.array([20, 40, 60, 80, 100])
    evals = np.array([0.42, 0.40, 0.43, 0.38, 0.39])
    assert "train_test_divergence" in _raised(
        diagnose(_with_eval(steps, train, ev_steps, evals)).findings)


def test_eval_rising_with_train_is_not_divergence():
    steps, train = _rise(200, 0.1, 0.8, 0.5, 4, 0.03)
    ev_steps = np.arange(10, 201, 20)
    evals = 0.1 + 0.5 * sigmoid((ev_steps / 200 - 0.5) * 12) + np.random.default_rng(5).normal(0, 0.02, len(ev_steps))
    assert "train_test_divergence" not in _raised(
        diagnose(_with_eval(steps, train, ev_steps, evals)).findings)


def test_eval_noise_next_to_a_flat_train_reward_is_not_divergence():
    steps = np.arange(1, 201)
    rng = np.random.default_rng(6)
    train = 0.5 + rng.normal(0, 0.03, 200)
    ev_steps = np.arange(10, 201, 20)
    evals = 0.4 + rng.normal(0, 0.03, len(ev_steps))
    assert "train_test_divergence" not in _raised(
        diagnose(_with_eval(steps, train, ev_steps, evals)).findings)


# ---- short runs are never silently healthy -------------------------------------------------

def _short_dead_correctness() -> list[tuple[int, dict]]:
    """39 steps: the correctness reward 0 on every step, a format reward that moves, reward_std
    exactly 0 on 18 of the 39 steps."""
    rng = np.random.default_rng(7)
    rows = []
    for step in range(1, 40):
        fmt = float(np.clip(0.2 + 0.01 * step + rng.normal(0, 0.05), 0, 1))
        rows.append((step, {"rewards/correctness/mean": 0.0, "rewards/format/mean": fmt,
                            "reward": fmt, "reward_std": 0.0 if step % 2 == 0 and step < 37
                            else 0.1 + abs(rng.normal(0, 0.02))}))
    return rows


def test_short_run_whose_task_reward_never_fires_is_not_healthy():
    d = diagnose(_short_dead_correctness())
    assert d.verdict != "healthy", [(f.category, f.severity) for f in d.findings]
    f = _raised(d.findings)["dead_reward_component"]
    assert f.metric == "rewards/correctness/mean"


def test_a_check_too_short_to_judge_says_so_in_unchecked():
    """The stall rule needs 50 steps: a 39-step run lists it with the reason instead of
    silently passing it."""
    d = diagnose(_short_dead_correctness())
    assert "stalled" in d.unchecked
    assert "39" in d.unchecked["stalled"] and "50" in d.unchecked["stalled"], d.unchecked


def test_a_penalty_component_constant_at_zero_stays_info():
    """A penalty that never triggers is constant at 0 too: not the task failing."""
    steps, c = healthy_cols(100, 1)
    c["rewards/repetition_penalty/mean"] = np.zeros(len(steps))
    found = diagnose(rows_from(steps, **c)).findings
    dead = [f for f in found if f.category == "dead_reward_component"]
    assert dead and all(f.severity == "info" for f in dead)


def test_short_entropy_collapse_that_bounces_back_on_the_last_row_is_not_a_collapse():
    """Entropy falls to a twentieth and comes back on the last row: the short-run rule judges
    the largest of the last rows (a minimum would call this a collapse)."""
    ent = [1.0, 1.0, 1.0, 1.0, 0.05, 0.05, 0.9]
    rows = [(i + 1, {"entropy": e, "reward": 0.5}) for i, e in enumerate(ent)]
    assert "entropy_collapse" not in {f.category for f in diagnose(rows).findings}


# ---- spikes and collapses on the run's own scale -------------------------------------------

def test_kl_estimator_hovering_around_zero_has_no_spikes():
    """A k3-style estimator whose typical value is -0.0004 and which wanders to 0.06: against
    its few tiny positive values everything looks "10x", but nothing is a KL spike."""
    rng = np.random.default_rng(8)
    steps, c = healthy_cols(500, 1)
    kl = rng.normal(-0.0004, 0.002, len(steps))
    kl[rng.choice(len(steps), 40, replace=False)] = rng.uniform(0.01, 0.063, 40)
    c["kl"] = kl
    assert "kl_spike" not in _raised(diagnose(rows_from(steps, **c)).findings)


def test_kl_early_rise_from_zero_is_not_a_spike():
    """KL starts at ~0 by construction and rises, in noisy steps, to its working level 0.3:
    points on the ramp are far above the tiny values before them, but below where the run
    settles ("5 KL spikes (up to 0.0211) against a typical 0.0222")."""
    rng = np.random.default_rng(9)
    steps, c = healthy_cols(300, 1)
    kl = 0.3 + rng.normal(0, 0.01, len(steps))
    kl[:30] = 0.001 + np.abs(rng.normal(0, 1e-4, 30))
    kl[[12, 16, 20, 24, 28]] = [0.02, 0.05, 0.1, 0.2, 0.25]  # the ramp, in noisy steps
    c["kl"] = kl
    assert "kl_spike" not in _raised(diagnose(rows_from(steps, **c)).findings)


def test_real_kl_spikes_are_still_spikes():
    rng = np.random.default_rng(10)
    steps, c = healthy_cols(300, 1)
    kl = 0.01 + np.abs(rng.normal(0, 0.001, len(steps)))
    kl[[60, 120, 180, 240]] = 2.0
    c["kl"] = kl
    assert "kl_spike" in _raised(diagnose(rows_from(steps, **c)).findings)


def test_a_reward_near_zero_moving_by_less_than_its_noise_is_no_collapse():
    """A reward of 0.033 drifting to 0.023 (per-step noise 0.015) is not a critical collapse:
    the move is smaller than the run's own noise and tiny in absolute terms."""
    rng = np.random.default_rng(11)
    steps = np.arange(1, 301)
    level = np.where(steps < 120, 0.033, 0.023) + np.where((steps > 60) & (steps < 120), 0.01, 0)
    reward = np.clip(level + rng.normal(0, 0.015, 300), 0, None)
    found = _raised(diagnose(rows_from(steps, reward=reward)).findings)
    assert "reward_collapse" not in found


def test_a_real_collapse_is_still_critical():
    rng = np.random.default_rng(12)
    steps = np.arange(1, 301)
    level = np.where(steps < 150, 0.1 + 0.6 * steps / 150, 0.1)
    reward = level + rng.normal(0, 0.05, 300)
    f = _raised(diagnose(rows_from(steps, reward=reward)).findings)["reward_collapse"]
    assert f.severity == "critical"


def test_loss_blowing_up_by_orders_of_magnitude_without_grad_norm_is_instability():
    """A hand-written loop's loss reaching 2.4e7 (27 steps above 1,000) with no grad_norm
    logged."""
    rng = np.random.default_rng(13)
    steps = np.arange(1, 201)
    loss = rng.normal(0.05, 0.02, 200)
    loss[150:177] = 10 ** rng.uniform(3, 7.4, 27)
    reward = 0.3 + rng.normal(0, 0.03, 200)
    f = _raised(diagnose(rows_from(steps, loss=loss, reward=reward)).findings)
    assert "numerical_instability" in f
    assert 140 <= f["numerical_instability"].first_step <= 151


def test_tiny_grad_norm_bumps_without_reward_spread_are_not_instability():
    """grad_norm ~1e-4 (no reward spread: nothing to learn) with a few steps at ~0.1: the bumps
    are tiny in absolute terms."""
    rng = np.random.default_rng(14)
    steps = np.arange(1, 201)
    g = np.abs(rng.normal(1e-4, 2e-5, 200))
    g[[30, 80, 130, 170]] = 0.1
    reward = np.zeros(200)
    found = _raised(diagnose(rows_from(steps, grad_norm=g, reward=reward,
                                       frac_reward_zero_std=np.ones(200))).findings)
    assert "numerical_instability" not in found


# ---- truncation and component trade-offs ---------------------------------------------------

def test_truncation_share_is_reported_when_lengths_grow_into_the_cap():
    """Lengths grow 300 -> 900 into a 1024 cap and 15-60% of completions are clipped: the
    truncation share is its own finding, not only the growth."""
    steps, c = healthy_cols(200, 1)
    t = steps / 200
    c["completions/mean_length"] = 300 + 600 * t
    c["completions/clipped_ratio"] = 0.02 + 0.5 * t ** 2
    c["completions/max_length"] = np.where(t > 0.4, 1024.0, 400 + 1500 * t)
    d = diagnose(rows_from(steps, **c))
    assert "truncation" in _raised(d.findings) and "length_explosion" in d.categories


def test_max_length_at_the_cap_is_truncation_without_a_clipped_ratio():
    steps, c = healthy_cols(200, 1)
    c.pop("completions/clipped_ratio")
    c["completions/mean_length"] = 620 + np.random.default_rng(15).normal(0, 20, len(steps))
    c["completions/max_length"] = np.full(len(steps), 1024.0)
    assert "truncation" in _raised(diagnose(rows_from(steps, **c)).findings)


def test_a_rising_component_paid_for_by_a_falling_one_with_a_flat_total_is_hacking():
    """A format component 0 -> 0.94 against a diversity component -0.30 -> -0.86, total flat."""
    rng = np.random.default_rng(16)
    steps = np.arange(1, 301)
    t = steps / 300
    fmt = np.clip(0.94 * sigmoid((t - 0.3) * 14) + rng.normal(0, 0.05, 300), 0, 1)
    div = -0.30 - 0.56 * sigmoid((t - 0.35) * 12) + rng.normal(0, 0.05, 300)
    total = 0.4 + rng.normal(0, 0.15, 300)
    found = _raised(diagnose(rows_from(steps, **{"rewards/format/mean": fmt,
                                                 "rewards/diversity/mean": div,
                                                 "reward": total})).findings)
    assert "reward_hacking" in found


def test_a_component_that_saturated_early_paying_for_a_later_fall_is_hacking_not_a_stall():
    """The format reward reaches 0.94 within the first tenth, then the diversity component
    falls -0.35 -> -0.78 and the total stays flat: measured third against third the format
    component never moved (its first third is already at the ceiling), and the run was called
    stalled."""
    rng = np.random.default_rng(16)
    n = 120
    steps = np.arange(1, n + 1)
    t = steps / n
    fmt = np.clip(0.94 * sigmoid((t - 0.06) * 60) + rng.normal(0, 0.04, n), 0, 1)
    div = -0.30 - 0.56 * sigmoid((t - 0.6) * 5) + rng.normal(0, 0.06, n)
    total = 0.3 + rng.normal(0, 0.12, n)
    found = _raised(diagnose(rows_from(steps, **{"rewards/format/mean": fmt,
                                                 "rewards/diversity/mean": div,
                                                 "reward": total})).findings)
    assert "reward_hacking" in found and "stalled" not in found


# ---- a reward that never varies ------------------------------------------------------------

def _constant_reward_rows(value: float = 1.0, n: int = 60) -> list[tuple[int, dict]]:
    return [(s, {"reward": value, "reward_std": 0.0, "frac_reward_zero_std": 1.0,
                 "rewards/judge/mean": value}) for s in range(1, n + 1)]


def test_a_reward_identical_for_every_completion_is_no_reward_signal():
    d = diagnose(_constant_reward_rows())
    found = _raised(d.findings)
    assert "no_reward_signal" in found
    assert found["no_reward_signal"].severity == "critical"
    assert "zero_reward_spread" not in found  # not "prompts too easy"


def test_no_fix_offers_a_larger_group_for_a_constant_reward():
    """Doubling num_generations cannot give a group spread when every completion gets the same
    reward: "Try this fix" must not offer it."""
    from app.diagnostics.fixes import propose

    d = diagnose(_constant_reward_rows())
    proposals = [propose(f.category, {"num_generations": 4}, f.evidence) for f in d.findings]
    assert not any(p and any(c.key == "num_generations" for c in p.changes) for p in proposals)


def test_groups_tied_at_zero_at_the_bottom_of_a_negative_reward_are_not_too_easy():
    """Every group ties at exactly 0, the lowest score a completion gets once penalties stop
    (the reward went negative early on): nothing passes, so not "prompts too easy"."""
    rows = []
    for s in range(1, 121):
        r = -0.5 if s <= 10 else 0.0
        rows.append((s, {"reward": r, "frac_reward_zero_std": 1.0 if s > 10 else 0.5,
                         "reward_std": 0.0 if s > 10 else 0.3}))
    f = [f for f in diagnose(rows).findings if f.category in ("zero_reward_spread", "no_reward_signal")]
    assert f and all(x.evidence.get("kind") != "too_easy" for x in f), [(x.category, x.evidence) for x in f]


# ---- calibrated on the corpus's tuning split ------------------------------------------------

def test_a_reward_pinned_at_its_floor_with_no_spread_metric_is_zero_spread():
    """verl's score falls -0.68 -> -1.0 within 12 steps and stays exactly at -1.0, the floor,
    for 250 steps; no spread metric is logged: every completion scores the floor."""
    rows = [(s, {"reward": max(-1.0, -0.68 - 0.03 * s) if s < 12 else -1.0}) for s in range(262)]
    f = _raised(diagnose(rows).findings)["zero_reward_spread"]
    assert f.severity == "critical" and f.first_step <= 15


def test_a_collapse_within_the_early_window_is_measured_from_the_first_points():
    """Entropy 0.21 -> 2e-4 and length 1759 -> 1 by step 12 of 262: the early window (first
    15 %) is already at the collapsed level, the first points are not."""
    rows = []
    for s in range(262):
        k = min(s, 12) / 12
        rows.append((s, {"entropy": 0.21 * (1 - k) + 2e-4 * k,
                         "completions/mean_length": 1759 * (1 - k) + 1.0 * k,
                         "reward": 0.3 + 0.001 * (s % 7)}))
    found = _raised(diagnose(rows).findings)
    assert "entropy_collapse" in found and "length_collapse" in found


def test_entropy_collapse_while_the_eval_score_climbs_is_a_warning_not_critical():
    steps = np.arange(1, 201)
    rng = np.random.default_rng(17)
    entropy = np.where(steps < 8, 0.46, 0.04) + np.abs(rng.normal(0, 0.003, 200))
    train = 0.1 + 0.6 * sigmoid((steps / 200 - 0.3) * 10) + rng.normal(0, 0.03, 200)
    rows = _with_eval(steps, train, np.arange(4, 201, 4),
                      0.03 + 0.7 * sigmoid((np.arange(4, 201, 4) / 200 - 0.2) * 10),
                      entropy=entropy)
    f = _raised(diagnose(rows).findings)["entropy_collapse"]
    assert f.severity == "warning"


def test_a_flat_train_reward_next_to_a_rising_eval_score_is_not_a_stall():
    rng = np.random.default_rng(18)
    steps = np.arange(1, 121)
    train = 0.8 + rng.normal(0, 0.05, 120)
    ev_steps = np.arange(20, 121, 20)
    evals = np.array([0.756, 0.77, 0.79, 0.80, 0.82, 0.835])
    found = _raised(diagnose(_with_eval(steps, train, ev_steps, evals)).findings)
    assert not {"stalled", "reward_collapse"} & set(found), found


def test_a_flat_reward_point_noise_bump_is_no_collapse():
    """A flat reward (0.45 +- 0.037 per step) whose smoothed curve wanders 0.505 -> 0.451: the
    "peak" is noise, not something learned and lost."""
    rng = np.random.default_rng(20)
    steps = np.arange(0, 167)
    reward = 0.46 + 0.02 * np.sin(steps / 15) + rng.normal(0, 0.037, 167)
    assert "reward_collapse" not in _raised(diagnose(rows_from(steps, reward=reward)).findings)


def test_kl_of_ten_nats_from_the_first_step_is_a_warning():
    steps, c = healthy_cols(60, 1)
    c["kl"] = 10 + np.random.default_rng(20).normal(0, 0.3, len(steps))
    f = [x for x in diagnose(rows_from(steps, **c)).findings if x.category == "kl_offset"]
    assert f and f[0].severity == "warning"


def test_a_task_reward_that_never_pays_next_to_zero_spread_is_critical():
    """The accuracy reward is 0 on all 33 steps, the format reward saturates, reward_std is 0 on
    most later steps: nothing left to learn the task from."""
    rng = np.random.default_rng(21)
    rows = []
    for s in range(1, 34):
        fmt = min(1.0, 0.1 * s) + rng.normal(0, 0.02)
        rows.append((s, {"rewards/accuracy_reward/mean": 0.0, "rewards/format_reward/mean": fmt,
                         "reward": fmt, "reward_std": 0.0 if s > 15 and s % 4 else 0.2}))
    d = diagnose(rows)
    assert d.verdict == "critical", [(f.category, f.severity) for f in d.findings]


def test_best_and_worst_reward_equal_on_every_step_is_zero_spread():
    """A loop that prints min_reward == max_reward on every step (16 samples a prompt, the
    same score each) logs no reward_std: the batch's best and worst say it."""
    rows = []
    for s in range(1, 97):
        r = (0.16, 0.16, 0.14)[s % 3]
        rows.append((s, {"reward": r, "reward_max": r, "reward_min": r, "loss": -0.0}))
    found = _raised(diagnose(rows).findings)
    assert found.get("zero_reward_spread") or found.get("no_reward_signal"), found


def test_a_component_at_one_value_but_for_one_odd_batch_is_dead():
    """A format reward of 0.05 on 119 of 120 rows and 0.049375 on one is no signal either."""
    steps, c = healthy_cols(120, 1)
    fmt = np.full(len(steps), 0.05)
    fmt[40] = 0.049375
    c["rewards/format_reward_adapter/mean"] = fmt
    assert "dead_reward_component" in diagnose(rows_from(steps, **c)).categories


def test_eval_rows_marked_by_a_flag_with_their_own_score_name_show_divergence(tmp_path):
    """A loop's JSONL: train rows by `iteration`, eval rows flagged `"eval": true` scoring
    `ndcg@10`; train reward rises 2.6x while the held-out score falls 26 %: read end to end as
    `grpodeck diagnose` reads it, a divergence (the eval rows used to be ignored)."""
    import json

    from app.imports.service import diagnose_path

    rng = np.random.default_rng(22)
    lines = []
    for s in range(1, 201):
        lines.append({"iteration": s, "train_reward": 0.2 + 0.32 * s / 200 + rng.normal(0, 0.02),
                      "loss": 0.1})
        if s % 20 == 0:
            lines.append({"iteration": s, "eval": True,
                          "ndcg@10": 0.5 * (1 - 0.26 * s / 200) + rng.normal(0, 0.005)})
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    d = diagnose_path(path)
    assert "eval_reward" in d.metrics and "reward" in d.metrics
    assert "train_test_divergence" in _raised(d.findings)


def test_a_long_ramp_and_fall_is_a_collapse_measured_on_single_rows():
    """20k steps (buckets of 256 rows): the bucket means' differences are the ramp itself, so
    the single-row noise comes from the ranges inside the buckets, not from them."""
    rng = np.random.default_rng(23)
    steps = np.arange(1, 20_001)
    level = np.where(steps <= 8000, 0.1 + 0.7 * steps / 8000,
                     0.8 - 0.6 * np.minimum(1.0, (steps - 8000) / 8000))
    reward = level + rng.normal(0, 0.05, len(steps))
    assert "reward_collapse" in _raised(diagnose(rows_from(steps, reward=reward)).findings)


def test_every_count_bound_check_says_when_a_run_is_too_short_for_it():
    """Five rows of KL, components, lengths and three eval points: each check that needs more
    rows lists itself with the reason, none passes silently."""
    rows = [(s, {"reward": 0.1 * s, "kl": 0.01, "rewards/a/mean": 0.1 * s, "rewards/b/mean": 0.2,
                 "completions/mean_length": 100.0 + s, **({"eval_reward": 0.1} if s % 2 else {})})
            for s in range(1, 6)]
    unchecked = diagnose(rows).unchecked
    for check, reason in (("kl_level", "5 rows; needs 6"), ("hacking", "5 rows; needs 8"),
                          ("length_level", "5 rows; needs 6"), ("divergence", "3 rows; needs 4")):
        assert unchecked.get(check) == reason, (check, unchecked)
