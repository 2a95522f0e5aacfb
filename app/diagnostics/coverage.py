"""What a diagnosis could check: the metrics read and the checks left without their metric.

Why: a log whose keys the Deck does not know used to come out "healthy, 0 findings" although
nothing was read. Coverage is derived from the detectors' own declarations (``Detector.needs``,
by default the first of ``reads``), never from a hand list, so a new detector is covered too.
Without a reward metric none of the reward checks ran, so the verdict cannot be "healthy".
A check whose metric the run's own settings rule out (no eval split, beta 0, no GPU) is "not
applicable" with that reason, apart from the checks that lack data (issue 56): "4 checks could
not run" read as an error for absences the run was set up to have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.model import Diagnosis

UNKNOWN = "unknown"  # the verdict when no reward metric was read and nothing is wrong
REWARD_METRICS = ("reward", COMPONENTS)  # total reward, or any train reward component
MAX_KEYS_SHOWN = 30  # keys listed in the "no reward metric among: ..." reason


def has_reward(names: Iterable[str]) -> bool:
    """True when some canonical name read is a reward (total or a component)."""
    return any(n == r or ("*" in r and fnmatchcase(n, r)) for n in names for r in REWARD_METRICS)


def reward_read(diagnosis: Diagnosis) -> bool:
    """False only when the diagnosis knows its coverage and no reward metric is in it (one
    built from findings alone, as tests do, says nothing about what was read)."""
    known = bool(diagnosis.metrics or diagnosis.unchecked)
    return has_reward(diagnosis.metrics) or not known


def unchecked(detectors: Iterable[Detector], names: Iterable[str],
              extent: Callable[[Detector], tuple[int, int]] | None = None) -> dict[str, str]:
    """{check name: the metric it needs} for every check none of whose needs was read, and
    {check name: why the run is too short} for a check whose metric was read over fewer steps
    or rows than its rule judges (``extent(detector)`` gives its needed metric's (span, rows));
    a bare function standing in for a detector, as tests plant, declares nothing."""
    read = frozenset(names)
    out = {}
    for d in detectors:
        if not isinstance(d, Detector):
            continue
        if not d.can_check(read):
            out[d.name] = " or ".join(d.required)
        elif extent is not None and d.bounded and (short := d.too_short(*extent(d))):
            out[d.name] = short
    return out


def explain(value: str) -> str:
    """An ``unchecked`` entry in words: a too-short reason as it is ("39 steps; needs 50"),
    a missing metric as "needs reward"."""
    return value if value[:1].isdigit() else f"needs {value}"


def reason(keys: Iterable[str]) -> str:
    """The words that explain an ``unknown`` verdict, naming the keys that were in the log."""
    shown = sorted(keys)
    more = len(shown) - MAX_KEYS_SHOWN
    listed = ", ".join(shown[:MAX_KEYS_SHOWN]) + (f" (+{more} more)" if more > 0 else "")
    return f"no reward metric among: {listed or 'no numeric keys'}"


NO_EVAL = "no eval split"
NO_KL = "beta is 0: no KL penalty"
NO_GPU = "no GPU in use"


def _evaluates(spec: Mapping[str, Any]) -> bool | None:
    """Whether the run was set up to evaluate: a launched run's ``eval_split``, a TRL script's
    ``eval_strategy``; None when its spec does not say (an import)."""
    if "eval_split" in spec:
        return bool(spec["eval_split"])
    if "eval_strategy" in spec:
        return str(spec["eval_strategy"]).lower() not in ("no", "none", "")
    return None


def _ruled_out(metric: str, spec: Mapping[str, Any], names: frozenset[str]) -> str | None:
    """Why the run's settings rule ``metric`` out (a needed name or pattern), or None."""
    if metric.startswith("eval_") and _evaluates(spec) is False:
        return NO_EVAL
    if metric == "kl" and spec.get("beta") == 0:
        return NO_KL
    if metric.startswith("system/gpu") and any(n.startswith("system/") for n in names) and not any(
            n.startswith("system/gpu") for n in names):
        return NO_GPU  # the run reports its process's system metrics, none of a GPU
    return None


def not_applicable(unchecked: Mapping[str, str], spec: Mapping[str, Any],
                   names: Iterable[str]) -> dict[str, str]:
    """{check: why it does not apply} for the ``unchecked`` checks every metric they could use
    is ruled out for by the run's settings (``spec``) and the names it reported; the other
    unchecked checks lack data (a metric not logged, a run too short)."""
    reported = frozenset(names)
    out: dict[str, str] = {}
    for check, needs in unchecked.items():
        if needs[:1].isdigit():  # too short: data, not settings
            continue
        reasons = {_ruled_out(m, spec, reported) for m in needs.split(" or ")}
        if len(reasons) == 1 and None not in reasons:
            out[check] = reasons.pop()  # type: ignore[assignment]
    return out
