"""Train/test divergence: train reward rises while held-out eval reward falls."""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import NO_NOISE
from app.diagnostics.model import Finding
from app.diagnostics.stats import head, med, noise_sigma, r3, rho_crit, robust_sigma, spearman, tail
from app.diagnostics.view import View

MIN_EVAL_PTS = 4  # eval runs every N steps; fewer points cannot show a trend
MIN_TRAIN_PTS = 6
HALF = 0.5  # eval is compared half against half: it has few points
HALF_MIN_PTS = 2
EVAL_DROP_SIGMA = 1.0  # eval must fall by at least its own noise level (half-to-half medians)

ACTIONS = ["Inspect train rollouts with high reward: is the reward being gamed?",
           "Fix the reward loophole so train reward tracks the real (test) objective",
           "Stop at the checkpoint with the best eval reward"]


def detect(view: View) -> list[Finding]:
    e, r = view.series("eval_reward"), view.series("reward")
    if e is None or r is None or len(e) < MIN_EVAL_PTS:
        return []
    w = r.between(e.steps[0], e.steps[-1])
    if len(w) < MIN_TRAIN_PTS:
        return []
    rho_t, rho_e = spearman(w.steps, w.values), spearman(e.steps, e.values)
    sig_e = noise_sigma(e.values) or robust_sigma(e.values) or NO_NOISE
    drop = (med(head(e.steps, e.values, HALF, HALF_MIN_PTS)) - med(tail(e.steps, e.values, HALF, HALF_MIN_PTS))) / sig_e
    if rho_t < rho_crit(len(w)) or rho_e > -rho_crit(len(e)) or drop < EVAL_DROP_SIGMA:
        return []
    return [Finding(
        category="train_test_divergence", severity="warning", first_step=e.first,
        last_step=e.last,
        summary=(f"Train reward rises while eval reward falls (steps {e.first}-{e.last}): "
                 "the policy learns something that does not transfer — likely reward hacking."),
        evidence={"train_rank_trend_rho": r3(rho_t), "eval_rank_trend_rho": r3(rho_e),
                  "eval_drop_in_noise_sigmas": r3(drop), "eval_points": len(e),
                  "expected": "eval reward rising with train reward"},
        actions=ACTIONS, metric="eval_reward")]


DETECTORS = (Detector("divergence", ("eval_reward", "reward"), detect),)
