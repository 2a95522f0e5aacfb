"""The severity rule: what makes a finding info, warning or critical (one place).

**critical**: the run can no longer learn, or its numbers are broken, and waiting will not
fix it; stop or change it now.
  * the optimiser step is non-finite (NaN/inf ``loss`` or ``grad_norm``)             numerics
  * no learning signal: >= 95% of groups with zero reward spread (an exact signal: after 3
    rows), entropy below 10% of its early level, or nearly every completion empty / a few
    tokens long                                                                   detectors
  * what was learned is gone: the reward fell from its peak back to (or below) its
    start and stays there                                                         collapse
  * the policy is far from the reference: KL >= 5 nats per token                        kl
  * a finding that lasts (``SUSTAINED``): a KL blow-up sustained over many steps      here
  * two findings each survivable alone that together leave nothing to learn from
    (``COMBINATIONS``): entropy collapse + zero spread, entropy blow-up + completions at
    the length cap (grown or cut), entropy collapse + length collapse, a task reward that
    never pays + zero spread                                                          here
**warning**: the run wastes compute or shows a bug it might still recover from (stall,
truncation, repeated spikes, hacking that persists to the end, partial collapse).
**info**: worth knowing, nothing to do now (dead components, a KL offset from step 1, a
transient hacking episode, a benign length drop, an internal error of a check).

Single-signal thresholds live with their detectors (named constants); this module applies
the rules that look across findings or along time, after all detectors ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnostics.model import Finding, severity_rank


@dataclass(frozen=True)
class Combination:
    categories: tuple[str, str]
    reason: str


COMBINATIONS = (
    Combination(("entropy_collapse", "zero_reward_spread"),
                "entropy has collapsed and most groups have zero reward spread: no diversity "
                "and no advantage left, the run can no longer learn"),
    Combination(("entropy_blowup", "length_explosion"),
                "entropy blew up while completions run into the length cap: near-random text "
                "that never terminates"),
    Combination(("entropy_blowup", "truncation"),
                "entropy blew up while completions are cut at the length cap: near-random text "
                "that never terminates"),
    Combination(("entropy_collapse", "length_collapse"),
                "completions shrank and the policy stopped exploring: degenerate short output"),
    # a dead component is a warning only when it is the task itself at its floor (issue 54)
    Combination(("dead_reward_component", "zero_reward_spread"),
                "the task reward never pays and most groups have no spread in the rest: "
                "nothing the run can learn the task from"),
)


@dataclass(frozen=True)
class Sustained:
    category: str
    min_steps: int  # the finding has lasted at least this many steps ...
    min_share: float  # ... and this share of the run so far
    reason: str


SUSTAINED = (
    # A brief KL excursion can come back; one that lasts a quarter of the run (and at least 50
    # steps) has moved the policy for good: outputs drift from what the reference could say.
    Sustained("kl_blowup", 50, 0.25, "KL has stayed blown up for a long stretch of the run"),
)


def _escalate(f: Finding, reason: str, **why: object) -> None:
    if severity_rank(f.severity) < severity_rank("critical"):
        f.severity = "critical"
        f.evidence = {**f.evidence, "escalated_to_critical": reason, **why}


def apply_severity_rule(findings: list[Finding]) -> list[Finding]:
    """Escalate combinations and sustained findings to critical (in place; returns the list).

    Only findings that are already warnings take part: an info finding (benign or transient
    by its own detector's judgement) never makes a combination."""
    active = {f.category: f for f in findings if severity_rank(f.severity) >= 1}
    for combo in COMBINATIONS:
        a, b = (active.get(c) for c in combo.categories)
        if a is not None and b is not None:
            _escalate(a, combo.reason, together_with=b.category)
            _escalate(b, combo.reason, together_with=a.category)
    if findings:
        run_first = min(f.first_step for f in findings)
        run_last = max(f.last_step for f in findings)
        for rule in SUSTAINED:
            f = active.get(rule.category)
            if f is None:
                continue
            lasted = f.last_step - f.first_step
            if lasted >= rule.min_steps and lasted >= rule.min_share * max(run_last - run_first, 1):
                _escalate(f, rule.reason, sustained_steps=lasted)
    return findings
