"""Incremental diagnostics: ``DiagnosticsState`` ingests metric batches and re-diagnoses.

Design (why it is cheap per batch and JSON-storable):
  * each tracked metric keeps a bounded, step-bucketed history (see ``history.py``): early
    baselines, the running best and recent windows all come from it; cost per update depends
    on the batch size and ``MAX_BUCKETS``, never on the run length;
  * events that must never be forgotten (NaN/inf, spikes, dead components via min/max) are
    accumulated separately;
  * detectors are pure functions of that state, so one-shot ``diagnose(rows)`` and many small
    ``update`` calls see the same data;
  * findings persist by construction: a condition in the history keeps being reported. A
    finding's ``first_step`` is kept from earlier updates while it stays present; if a
    condition resolves, its detector stops reporting it (or reports it as info, e.g. a
    transient hacking episode), so the verdict reflects the current state.
Rows must arrive sorted by step; a step already seen for a metric is ignored (idempotent
re-sends).
"""

from __future__ import annotations

import logging
from collections import Counter
from fnmatch import fnmatchcase

import numpy as np

from app.diagnostics import coverage
from app.diagnostics.detector import Detector
from app.diagnostics.detectors import DETECTORS
from app.diagnostics.detectors.zero_spread import derived_columns
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import Diagnosis, Finding, RunContext
from app.diagnostics.severity import apply_severity_rule
from app.diagnostics.view import View
from app.metrics.names import canonical_name, to_float

log = logging.getLogger(__name__)

STATE_VERSION = 1
DERIVED = "derived/"  # metrics the state computes from logged ones (not "read" from the log)
MAX_COMPONENTS = 16  # bound the state even if a run logs many reward functions
MAX_KEYS = 200  # keys remembered to explain an "unknown" verdict (bounded like the rest)
INTERNAL_ERROR = "internal_error"  # category of the note a failing detector leaves
ERROR_ACTION = "Report this run to the GRPO Deck maintainers (the server log has the traceback)"
ERROR_TEXT_MAX = 200  # characters of the exception message kept in the note

# Metric: detector failures since the process started, by detector name (read by ops pages
# and tests through ``detector_failures()``; a non-zero count is a bug to fix).
_FAILURES: Counter[str] = Counter()


def tracked_reads(detectors=None) -> tuple[frozenset[str], tuple[str, ...]]:
    """(exact names, ``*`` patterns) the detectors declare: what the state must keep."""
    reads = {r for d in (DETECTORS if detectors is None else detectors)
             for r in getattr(d, "reads", ())}
    return (frozenset(r for r in reads if "*" not in r),
            tuple(sorted(r for r in reads if "*" in r)))


TRACKED, TRACKED_PATTERNS = tracked_reads()

_tracked_cache: dict[str, str | None] = {}


def _tracked(key: str) -> str | None:
    """Canonical name if some detector reads this key, else None (cached per key)."""
    if key not in _tracked_cache:
        name = canonical_name(key)
        ok = name in TRACKED or any(fnmatchcase(name, p) for p in TRACKED_PATTERNS)
        _tracked_cache[key] = name if ok else None
    return _tracked_cache[key]


def detector_failures() -> dict[str, int]:
    """How often each detector raised in this process (the internal-error metric)."""
    return dict(_FAILURES)


def _plan(keys: tuple) -> tuple[tuple[str, str], ...]:
    """(key, canonical name) pairs to read from rows with this key set; when an old and a
    new spelling are both present, only the new one is read."""
    named = [(k, _tracked(k)) for k in keys if isinstance(k, str)]
    named = [(k, n) for k, n in named if n is not None]
    new = {n for k, n in named if k == n}
    return tuple((k, n) for k, n in named if k == n or n not in new)


def _values(raw: list) -> tuple[np.ndarray, np.ndarray]:
    """(values, ok mask): fast path when everything converts; else value by value."""
    try:
        v = np.asarray(raw, dtype=float)
        return v, np.ones(len(v), bool)
    except (TypeError, ValueError):
        conv = [to_float(x) for x in raw]
        ok = np.array([c is not None for c in conv], bool)
        return np.array([c if c is not None else 0.0 for c in conv], float), ok


def _columns(rows: list[tuple[int, dict]], seen: set[str] | None = None
             ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-metric (steps, values) arrays from rows, canonical names; new spellings win.

    Rows from one run share a key set, so the name mapping is planned once per key set and
    consecutive rows with the same plan are converted column-wise (the one-shot cost for
    long runs). A step repeated within the batch keeps its last value. ``seen`` collects
    every key (canonical name) of the rows, read or not, up to ``MAX_KEYS``.
    """
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    plans: dict[tuple, tuple] = {}
    i, n = 0, len(rows)
    while i < n:
        ks = tuple(rows[i][1])
        plan = plans.get(ks)
        if plan is None:
            plan = plans[ks] = _plan(ks)
            if seen is not None and len(seen) < MAX_KEYS:
                seen.update(canonical_name(k) for k in ks[:MAX_KEYS] if isinstance(k, str))
        j = i + 1
        while j < n and tuple(rows[j][1]) == ks:
            j += 1
        seg = rows[i:j]
        steps = np.fromiter((s for s, _ in seg), dtype=np.int64, count=len(seg))
        for key, name in plan:
            vals, ok = _values([m[key] for _, m in seg])
            parts.setdefault(name, []).append((steps[ok], vals[ok]))
        i = j
    cols = {}
    for name, pieces in parts.items():
        st = np.concatenate([p[0] for p in pieces]) if len(pieces) > 1 else pieces[0][0]
        va = np.concatenate([p[1] for p in pieces]) if len(pieces) > 1 else pieces[0][1]
        if len(pieces) > 1:
            order = np.argsort(st, kind="stable")
            st, va = st[order], va[order]
        if len(st) > 1 and (st[1:] == st[:-1]).any():
            keep = np.append(st[1:] != st[:-1], True)
            st, va = st[keep], va[keep]
        cols[name] = (st, va)
    return cols


class DiagnosticsState:
    """Everything needed to re-diagnose a run after each metric batch; JSON round-trips."""

    def __init__(self, context: RunContext | None = None) -> None:
        self.context = context or RunContext()
        self.metrics: dict[str, MetricHistory] = {}
        self.first_seen: dict[str, int] = {}  # finding key -> first_step while present
        self.keys: set[str] = set()  # every metric key seen, read or not (bounded)
        self.diagnosis = Diagnosis("healthy", [])
        # Rows arrived for steps at or below what was already fed (re-sent or out of order):
        # the bucketed history cannot take them in place, so its owner rebuilds it from the
        # stored rows before the next diagnosis (``app.health.state_cache``).
        self.stale = False

    @classmethod
    def new(cls, context: RunContext | None = None) -> DiagnosticsState:
        return cls(context)

    def update(self, rows: list[tuple[int, dict]], context: RunContext | None = None) -> Diagnosis:
        """Ingest rows (sorted by step; re-sent steps ignored) and return the diagnosis.

        ``rows=[]`` with a fresh ``context`` (``now``) re-checks time-based findings (lost).
        """
        self.feed(rows, context)
        self.diagnosis = self._diagnose()
        return self.diagnosis

    def feed(self, rows: list[tuple[int, dict]], context: RunContext | None = None) -> None:
        """Ingest rows without running the detectors (``update`` = feed + diagnose): what a live
        run's batches cost between two evaluations."""
        if context is not None:
            self.context = context
        cols = _columns(rows, self.keys)
        cols.update(derived_columns(cols))
        for name, (steps, values) in cols.items():
            h = self.metrics.get(name)
            if h is None:
                if name.startswith(("rewards/", "eval_rewards/")) and sum(
                        n.startswith(name.split("/")[0]) for n in self.metrics) >= MAX_COMPONENTS:
                    continue
                h = self.metrics[name] = MetricHistory()
            h.add(name, steps, values)

    def _diagnose(self) -> Diagnosis:
        view = View(self.metrics, self.context)
        findings: list[Finding] = []
        for det in DETECTORS:
            findings.extend(self._run_isolated(det, view))
        findings = apply_severity_rule(_suppress_redundant(findings))
        self.first_seen = self._onsets(findings)
        return self._with_coverage(Diagnosis.from_findings(findings))

    def _onsets(self, findings: list[Finding]) -> dict[str, int]:
        """While a run is live, a finding keeps the earliest onset it was shown with (the page
        must not see its start move later as buckets coarsen). Once the run is over the
        detectors' own onsets stand: the stored findings of an ended run are exactly what a
        whole-history diagnosis of its rows says, however its batches arrived (issue 31)."""
        seen: dict[str, int] = {}
        for f in findings:
            key = f"{f.category}|{f.metric}"
            if self.context.is_live and key in self.first_seen:
                f.first_step = min(f.first_step, self.first_seen[key])
            seen[key] = f.first_step
        return seen

    def _with_coverage(self, diagnosis: Diagnosis) -> Diagnosis:
        """Add what was read and what could not be checked; without any reward metric a
        diagnosis with nothing wrong is ``unknown``, never healthy (issue 23)."""
        read = sorted(n for n, h in self.metrics.items()
                      if h.first_step is not None and not n.startswith(DERIVED))
        diagnosis.metrics = read
        diagnosis.unchecked = coverage.unchecked(DETECTORS, read, self._extent)
        if not coverage.has_reward(read) and diagnosis.verdict == "healthy":
            diagnosis.verdict = coverage.UNKNOWN
            diagnosis.reason = coverage.reason(self.keys)
        return diagnosis

    def _extent(self, det: Detector) -> tuple[int, int]:
        """(steps covered, first to last inclusive; rows logged) of the longest-logged metric
        ``det`` needs."""
        best = (0, 0)
        for name, h in self.metrics.items():
            if h.first_step is not None and det.can_check({name}):
                best = max(best, (h.last_step - h.first_step + 1, h.n_rows))
        return best

    def _run_isolated(self, det: Detector, view: View) -> list[Finding]:
        """One detector's findings; if it raises, an ``internal_error`` note instead.

        Why: a detector bug must neither take down the metrics pipeline nor silently remove
        the other detectors' findings; it is logged with the run, counted, and shown."""
        try:
            return list(det(view.scoped(det) if isinstance(det, Detector) else view))
        except Exception as exc:
            name = getattr(det, "name", getattr(det, "__name__", repr(det)))
            _FAILURES[name] += 1
            log.exception("diagnostics detector %s failed on run %s at step %s", name,
                          self.context.run_id, view.last_step)
            step = view.last_step
            return [Finding(
                category=INTERNAL_ERROR, severity="info", first_step=step, last_step=step,
                summary=(f"The '{name}' check failed with an internal error; its findings are "
                         "missing from this diagnosis (the other checks ran)."),
                evidence={"detector": name,
                          "error": f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX]},
                actions=[ERROR_ACTION],
                metric=f"detector/{name}")]

    def to_json(self) -> dict:
        return {"version": STATE_VERSION, "context": self.context.to_dict(),
                "metrics": {k: h.to_json() for k, h in self.metrics.items()},
                "first_seen": dict(self.first_seen), "keys": sorted(self.keys),
                "diagnosis": self.diagnosis.to_dict(), "stale": self.stale}

    @classmethod
    def from_json(cls, d: dict) -> DiagnosticsState:
        if d.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported diagnostics state version {d.get('version')!r}")
        st = cls(RunContext.from_dict(d.get("context")))
        st.metrics = {k: MetricHistory.from_json(v) for k, v in d.get("metrics", {}).items()}
        st.first_seen = {k: int(v) for k, v in d.get("first_seen", {}).items()}
        st.keys = set(d.get("keys") or [])
        st.stale = bool(d.get("stale"))
        diag = d.get("diagnosis") or {"verdict": "healthy", "findings": []}
        st.diagnosis = Diagnosis.from_dict(diag)
        return st


def _suppress_redundant(findings: list[Finding]) -> list[Finding]:
    """Drop 'stalled' where another finding explains the flat reward better: a saturated run
    (zero spread, all groups pass) cannot trend upward, a reward that rose and collapsed
    from its peak is a collapse (with its onset at the decline), not a stall, and a flat
    total whose components pull apart is hacking (issue 31). A reward that never varies is
    "no reward signal", not zero spread or a stall (issue 54)."""
    explained = any((f.category == "zero_reward_spread" and f.evidence.get("kind") == "too_easy")
                    or (f.category == "reward_collapse" and f.severity != "info")
                    or (f.category == "reward_hacking" and f.evidence.get("explains_flat_total"))
                    for f in findings)
    no_signal = any(f.category == "no_reward_signal" for f in findings)
    return [f for f in findings if not (explained and f.category == "stalled")
            and not (no_signal and f.category in ("zero_reward_spread", "stalled"))]


def diagnose(rows: list[tuple[int, dict]], context: RunContext | None = None) -> Diagnosis:
    """One-shot diagnosis of a whole run (same code path as incremental updates)."""
    return DiagnosticsState.new(context).update(rows)
