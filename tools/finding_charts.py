"""The pictures of "Reading a run" (docs/findings/<category>.svg): one chart per finding category.

Each picture is a seeded synthetic run written to fail one way, diagnosed by the real detectors
(``app.diagnostics.diagnose``, the code path of a live run's evaluation and of ``grpodeck
diagnose``); the chart is the metric the finding names, with the finding's step range shaded, as
the run page shades it. A run that no longer raises its category is an error, so the docs cannot
keep a picture of a finding the detectors stopped making.

Usage (from the repository root): python tools/finding_charts.py [--out docs/findings]
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "clients" / "python")]

from app.diagnostics import Finding, RunContext, diagnose
from tests.diagnostics.conftest import healthy_cols
from tests.diagnostics.failure_runs import ramp as _ramp

N_STEPS = 300
WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 640, 230, 56, 16, 40, 30
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")


@dataclass(frozen=True)
class Example:
    """A run made to fail one way, the metrics to draw, and what the run knows about itself."""

    rows: list[tuple[int, dict]]
    draw: tuple[str, ...]
    context: RunContext | None = None


def _healthy(seed: int) -> tuple[np.ndarray, dict[str, np.ndarray], np.random.Generator]:
    """The diagnostics tests' healthy GRPO run (the reward rises, groups have spread, entropy
    drifts down slowly), and a generator for the failure drawn on top of it."""
    steps, cols = healthy_cols(N_STEPS, 1, seed)
    return steps, cols, np.random.default_rng(seed + 100)


def _rows(steps: np.ndarray, cols: dict[str, np.ndarray]) -> list[tuple[int, dict]]:
    """Metric rows as a trainer logs them; NaN entries are left out of their row."""
    names = list(cols)
    return [(int(s), {n: float(cols[n][i]) for n in names if not np.isnan(cols[n][i])})
            for i, s in enumerate(steps)]


def zero_reward_spread() -> Example:
    steps, c, _ = _healthy(1)
    gone = steps >= 100
    c["frac_reward_zero_std"] = np.where(gone, 1.0, c["frac_reward_zero_std"])
    c["reward_std"] = np.where(gone, 0.0, c["reward_std"])
    for name in ("reward", "rewards/format/mean", "rewards/accuracy/mean"):
        c[name] = np.where(gone, 0.0, c[name])
    return Example(_rows(steps, c), ("frac_reward_zero_std",))


def stalled() -> Example:
    steps, c, r = _healthy(2)
    c["reward"] = 0.6 + r.normal(0, 0.05, len(steps))
    c["rewards/format/mean"], c["rewards/accuracy/mean"] = c["reward"] / 2, c["reward"] / 2
    return Example(_rows(steps, c), ("reward",))


def reward_collapse() -> Example:
    steps, c, r = _healthy(3)
    c["reward"] = 0.4 + 0.8 * _ramp(steps, 20, 120) - 1.0 * _ramp(steps, 120, 170) \
        + r.normal(0, 0.04, len(steps))
    return Example(_rows(steps, c), ("reward",))


def entropy_collapse() -> Example:
    steps, c, r = _healthy(4)
    c["entropy"] = 0.9 - 0.85 * _ramp(steps, 100, 130) + np.abs(r.normal(0, 0.01, len(steps)))
    return Example(_rows(steps, c), ("entropy",))


def entropy_blowup() -> Example:
    steps, c, r = _healthy(5)
    c["entropy"] = 0.9 + 1.8 * _ramp(steps, 120, 160) + r.normal(0, 0.03, len(steps))
    return Example(_rows(steps, c), ("entropy",))


def kl_blowup() -> Example:
    steps, c, r = _healthy(6)
    c["kl"] = c["kl"] + 1.5 * _ramp(steps, 100, 150) + np.abs(r.normal(0, 0.05, len(steps)))
    return Example(_rows(steps, c), ("kl",))


def truncation() -> Example:
    steps, c, r = _healthy(7)
    k = len(steps)
    c["completions/clipped_ratio"] = np.clip(0.7 + r.normal(0, 0.04, k), 0, 1)
    c["completions/mean_length"] = 480 + r.normal(0, 6, k)
    return Example(_rows(steps, c), ("completions/clipped_ratio",),
                   RunContext(max_completion_length=512))


def length_explosion() -> Example:
    steps, c, r = _healthy(8)
    k = len(steps)
    grow = _ramp(steps, 80, 220)
    c["completions/mean_length"] = 200 + 800 * grow + r.normal(0, 10, k)
    c["completions/clipped_ratio"] = np.clip(0.02 + 0.7 * grow ** 2 + r.normal(0, 0.02, k), 0, 1)
    return Example(_rows(steps, c), ("completions/mean_length",),
                   RunContext(max_completion_length=1024))


def length_collapse() -> Example:
    steps, c, r = _healthy(9)
    c["completions/mean_length"] = np.where(steps < 150, 300 + r.normal(0, 10, len(steps)),
                                            25 + r.normal(0, 2, len(steps)))
    return Example(_rows(steps, c), ("completions/mean_length",))


def reward_hacking() -> Example:
    steps, c, r = _healthy(10)
    k = len(steps)
    fmt = 0.1 + 0.9 * _ramp(steps, 40, 200) + r.normal(0, 0.03, k)
    acc = 0.55 - 0.35 * _ramp(steps, 120, 260) + r.normal(0, 0.03, k)
    c.update({"rewards/format/mean": fmt, "rewards/accuracy/mean": acc, "reward": fmt + acc})
    return Example(_rows(steps, c), ("rewards/accuracy/mean", "rewards/format/mean"))


def train_test_divergence() -> Example:
    steps, c, r = _healthy(11)
    k = len(steps)
    c["reward"] = 0.3 + 0.9 * _ramp(steps, 20, 280) + r.normal(0, 0.04, k)
    evals = np.full(k, np.nan)
    at = steps % 10 == 0
    evals[at] = 0.6 - 0.4 * _ramp(steps[at], 60, 280) + r.normal(0, 0.02, int(at.sum()))
    c["eval_reward"] = evals
    return Example(_rows(steps, c), ("eval_reward", "reward"))


def numerical_instability() -> Example:
    steps, c, _ = _healthy(12)
    c["grad_norm"] = c["grad_norm"].copy()
    c["grad_norm"][steps >= 240] = np.inf
    c["loss"] = c["loss"].copy()
    c["loss"][steps >= 240] = np.nan
    return Example(_rows(steps, c), ("grad_norm",))


def dead_reward_component() -> Example:
    steps, c, _ = _healthy(13)
    c["rewards/format/mean"] = np.zeros(len(steps))
    c["reward"] = c["rewards/accuracy/mean"]
    return Example(_rows(steps, c), ("rewards/format/mean", "rewards/accuracy/mean"))


def no_reward_signal() -> Example:
    """A judge that gives every completion 0.5, whatever it says."""
    steps, c, _ = _healthy(14)
    for name in ("reward", "rewards/format/mean", "rewards/accuracy/mean"):
        c.pop(name)
    c["reward"] = np.full(len(steps), 0.5)
    c["rewards/judge/mean"] = np.full(len(steps), 0.5)
    c["frac_reward_zero_std"] = np.ones(len(steps))
    c["reward_std"] = np.zeros(len(steps))
    return Example(_rows(steps, c), ("reward",))


EXAMPLES: dict[str, Callable[[], Example]] = {f.__name__: f for f in (
    zero_reward_spread, stalled, reward_collapse, entropy_collapse, entropy_blowup, kl_blowup,
    truncation, length_explosion, length_collapse, reward_hacking, train_test_divergence,
    numerical_instability, dead_reward_component, no_reward_signal)}


def finding_of(category: str, example: Example) -> Finding:
    """The detectors' finding of ``category`` on the example: the one the picture shows."""
    found = [f for f in diagnose(example.rows, example.context).findings if f.category == category]
    if not found:
        raise SystemExit(f"{category}: the detectors no longer raise it on its example run")
    return max(found, key=lambda f: ("info", "warning", "critical").index(f.severity))


def _series(rows: list[tuple[int, dict]], name: str) -> list[tuple[int, float]]:
    return [(step, m[name]) for step, m in rows if name in m]


def _scale(lo: float, hi: float, a: float, b: float) -> Callable[[float], float]:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def svg(category: str, example: Example, finding: Finding) -> str:
    """One chart: the drawn metrics over steps, the finding's range shaded, non-finite points as
    red marks on the top edge (the run page draws them as gaps with a red marker)."""
    series = {name: _series(example.rows, name) for name in example.draw}
    finite = [v for pts in series.values() for _, v in pts if math.isfinite(v)]
    lo, hi = min(finite), max(finite)
    lo, hi = lo - 0.05 * ((hi - lo) or 1), hi + 0.05 * ((hi - lo) or 1)
    x = _scale(1, N_STEPS, PAD_L, WIDTH - PAD_R)
    y = _scale(lo, hi, HEIGHT - PAD_B, PAD_T)
    title = f"{category} ({finding.severity}), steps {finding.first_step}-{finding.last_step}"
    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
         f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">'),
        f'<title>{html.escape(title)}</title>',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        (f'<rect x="{x(finding.first_step):.1f}" y="{PAD_T}" '
         f'width="{max(x(finding.last_step) - x(finding.first_step), 2):.1f}" '
         f'height="{HEIGHT - PAD_T - PAD_B}" fill="#d62728" fill-opacity="0.12"/>'),
        f'<text x="{PAD_L}" y="16" font-weight="bold">{html.escape(title)}</text>',
    ]
    for tick in np.linspace(lo, hi, 4):
        parts.append(f'<text x="{PAD_L - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" '
                     f'fill="#555">{tick:.3g}</text>')
        parts.append(f'<line x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y(tick):.1f}" '
                     f'y2="{y(tick):.1f}" stroke="#eee"/>')
    for step in (1, 100, 200, 300):
        parts.append(f'<text x="{x(step):.1f}" y="{HEIGHT - 10}" text-anchor="middle" '
                     f'fill="#555">{step}</text>')
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in pts if math.isfinite(v))
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" '
                     f'stroke-width="1.5"/>')
        parts.extend(f'<line x1="{x(s):.1f}" x2="{x(s):.1f}" y1="{PAD_T}" y2="{PAD_T + 6}" '
                     f'stroke="#d62728"/>' for s, v in pts if not math.isfinite(v))
        parts.append(f'<text x="{PAD_L + 8 + 220 * i}" y="{PAD_T - 8}" fill="{colour}">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "findings")
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for category, make in EXAMPLES.items():
        example = make()
        finding = finding_of(category, example)
        (out / f"{category}.svg").write_text(svg(category, example, finding))
        print(f"{category}: {finding.severity} steps {finding.first_step}-{finding.last_step}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
