"""What a group-size fix should do, read from the parent run's own rollouts.

"Try this fix" on a zero-spread finding doubles ``num_generations``. Whether that helps depends
on each prompt's success rate p: a group of G completions has no spread with probability
p^G + (1-p)^G, so a larger group rescues prompts the policy sometimes solves and none that it
never (or always) solves. The parent's newest captured groups give each prompt's observed rate
(the dry run's reading, ``app.dryruns.analysis``: a completion passes above the midpoint of the
totals seen), so the form shows the expected zero-spread share at the old and the new size
beside the share observed, before any compute is spent.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.dryruns.analysis import SPREAD_EPS, group_size_advice, spread, success_rates
from app.rollouts.models import RolloutGroup

RECENT_GROUPS = 256  # the policy as it is now, not as it was at step 1


def _total(completion: dict[str, Any]) -> float | None:
    value = completion.get("total")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def group_size_preview(db: Session, run_id: int, old: int, new: int) -> dict[str, Any] | None:
    """Expected zero-spread share at ``old`` and ``new`` group sizes from the run's newest
    groups with totals, and the share observed in them; None when the run captured none."""
    rows = db.execute(select(RolloutGroup.step, RolloutGroup.completions)
                      .where(RolloutGroup.run_id == run_id)
                      .order_by(RolloutGroup.step.desc(), RolloutGroup.group_index)
                      .limit(RECENT_GROUPS)).all()
    totals = [[_total(c) for c in completions] for _, completions in rows]
    totals = [ts for ts in totals if any(t is not None for t in ts)]
    if not totals:
        return None
    threshold, rates = success_rates(totals)
    observed = sum(spread(ts) <= SPREAD_EPS for ts in totals) / len(totals)
    steps = [step for step, _ in rows]
    return {"groups": len(totals), "first_step": min(steps), "last_step": max(steps),
            "threshold": threshold, "observed": observed, "old": old, "new": new,
            "rows": group_size_advice(rates, sorted({old, new}))}
