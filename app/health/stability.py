"""A verdict that does not flap: persistence before a finding escalates, hysteresis before it
eases or resolves.

The detectors (``app/diagnostics``) answer "what does the data show right now"; one noisy batch
can make them report a critical finding that is gone two batches later. People act on what the
page shows (alerts page someone, the guard rail stops a run), so what is *shown* follows the raw
detector output only after it has held:

* **Escalation** (a new finding, or a higher severity): the raw severity must hold in
  ``CONFIRM_EVALUATIONS`` consecutive evaluations that brought new steps, spanning at least
  ``confirm_steps(step)`` training steps. Until then a new finding is shown as ``info``
  (visible with its evidence, but it neither changes the verdict nor triggers the guard rail).
* **Easing and resolving** (a lower severity, or the finding gone): the same rule, the other
  way. A finding that disappears stays listed, active, until it has been absent that long;
  then it is marked resolved (and kept, with its range).
* Evaluations that bring no new step (the lost-run check re-evaluating time-based findings) do
  not count: silence is not evidence.
* An exact signal (a finding whose evidence says ``exact_signal``: e.g. every group without
  reward spread on each of a handful of rows) escalates at once: its detector already asked
  for consecutive rows, and a smoke run is over before three evaluations could confirm it.
* Not live (imports, one-shot diagnoses, finished runs): the detectors saw the whole history at
  once, so the raw severity is shown as is. ``lost`` has its own time thresholds and is exempt.

Pure functions over a small per-finding ``Memory`` that the health service stores with each
finding; no database or web code here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from app.diagnostics.model import severity_rank

CONFIRM_EVALUATIONS = 3  # consecutive evaluations with new steps before the shown severity moves
CONFIRM_MIN_STEPS = 5  # ...spanning at least this many training steps
CONFIRM_STEP_SHARE = 0.05  # ...or this share of the run so far, whichever is larger
MIN_VERDICT_STEPS = 5  # below this many steps, "healthy" would be a claim without evidence
EXEMPT = frozenset({"lost"})  # time-based, with thresholds of its own

PROVISIONAL = "info"  # how a finding that is not yet confirmed is shown


def confirm_steps(step: int) -> int:
    """Training steps a change must span before it is shown (longer runs, longer spans)."""
    return max(CONFIRM_MIN_STEPS, int(CONFIRM_STEP_SHARE * max(step, 0)))


def _rank(severity: str | None) -> int:
    return -1 if severity is None else severity_rank(severity)


@dataclass(frozen=True)
class Memory:
    """What the page shows for one finding, and the streak that may change it.

    ``shown`` is None when the finding is not active. ``toward`` is the severity the streak
    would move it to (None: resolve), ``streak`` how many evaluations it has lasted, and
    ``since_step`` the run's step when it began.
    """

    shown: str | None = None
    toward: str | None = None
    streak: int = 0
    since_step: int = 0

    @property
    def pending(self) -> bool:
        """True while a different severity is waiting for confirmation."""
        return self.streak > 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> Memory:
        data = data or {}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def advance(memory: Memory, raw: str | None, *, step: int, live: bool, new_steps: bool,
            category: str = "", exact: bool = False) -> Memory:
    """The next memory after one evaluation in which the detectors reported ``raw``
    (``exact``: the finding is an exact signal, shown as soon as it rises)."""
    if not live or category in EXEMPT:
        return Memory(shown=raw)
    if not new_steps:
        return memory
    if raw == memory.shown:
        return Memory(shown=memory.shown)
    rising = _rank(raw) > _rank(memory.shown)
    if rising and exact:
        return Memory(shown=raw)
    continues = memory.streak > 0 and (_rank(memory.toward) > _rank(memory.shown)) == rising
    if continues:  # a mixed streak moves only as far as all of it agrees
        pick = min if rising else max
        toward = pick(memory.toward, raw, key=_rank)
        streak, since = memory.streak + 1, memory.since_step
    else:
        toward, streak, since = raw, 1, step
    shown = memory.shown
    if shown is None and rising and raw is not None:
        shown = PROVISIONAL if _rank(raw) > _rank(PROVISIONAL) else raw
        if shown == toward:
            return Memory(shown=shown)
    if streak >= CONFIRM_EVALUATIONS and step - since >= confirm_steps(step):
        return Memory(shown=toward)
    return Memory(shown=shown, toward=toward, streak=streak, since_step=since)


def verdict(shown: Iterable[str], *, steps: int, live: bool, reward_read: bool = True) -> str:
    """The run's verdict from the severities shown: the worst warning/critical, else healthy,
    but never "healthy" before ``MIN_VERDICT_STEPS`` steps arrived ("waiting" while live,
    "insufficient" once it ended), nor when no reward metric was read ("unknown": none of the
    reward checks could run, issue 23)."""
    worst = max((severity_rank(s) for s in shown), default=-1)
    if worst >= severity_rank("critical"):
        return "critical"
    if worst >= severity_rank("warning"):
        return "warning"
    if steps < MIN_VERDICT_STEPS:
        return "waiting" if live else "insufficient"
    return "healthy" if reward_read else "unknown"


LABELS = {"healthy": "healthy", "warning": "warning", "critical": "critical",
          "waiting": "waiting for data", "insufficient": "not enough data",
          "unknown": "unknown"}


def label(stored: str | None, *, live: bool) -> tuple[str, str]:
    """(css key, words) for a stored verdict; a run that ended while waiting has too little."""
    key = stored or ("waiting" if live else "insufficient")
    if key == "waiting" and not live:
        key = "insufficient"
    return key, LABELS.get(key, key)
