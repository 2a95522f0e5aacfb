"""Data model of a diagnosis: findings, the verdict, and the run context detectors may use."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from grpodeck.contract.alerts import SEVERITIES, severity_rank


def json_safe(value: object) -> object:
    """Replace NaN/inf (not valid JSON, rejected by Postgres) by strings, recursively."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy scalar
        return json_safe(value.item())  # type: ignore[union-attr]
    return value


@dataclass
class Finding:
    """One health problem (or notable fact) with the numbers that show it and what to do."""

    category: str
    severity: str
    first_step: int
    last_step: int
    summary: str
    evidence: dict = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    metric: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        self.first_step, self.last_step = int(self.first_step), int(self.last_step)

    @property
    def key(self) -> tuple[str, str | None]:
        """Identity of a finding across incremental updates."""
        return (self.category, self.metric)

    def to_dict(self) -> dict:
        return json_safe(asdict(self))  # type: ignore[return-value]

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        return cls(**{k: d[k] for k in ("category", "severity", "first_step", "last_step",
                                         "summary", "evidence", "actions", "metric")})


@dataclass
class Diagnosis:
    """Verdict plus findings; the verdict is the worst warning/critical severity present.

    Coverage: ``metrics`` are the canonical names the checks read, ``unchecked`` maps each
    check that could not run to the metric it needs, and ``reason`` says why the verdict is
    ``unknown`` (no reward metric read) when it is."""

    verdict: str
    findings: list[Finding]
    metrics: list[str] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)
    reason: str | None = None

    @classmethod
    def from_findings(cls, findings: list[Finding]) -> Diagnosis:
        ordered = sorted(findings, key=lambda f: (-severity_rank(f.severity), f.first_step,
                                                  f.category))
        worst = max((severity_rank(f.severity) for f in findings), default=0)
        verdict = {0: "healthy", 1: "warning", 2: "critical"}[worst]
        return cls(verdict=verdict, findings=ordered)

    @property
    def categories(self) -> list[str]:
        return sorted({f.category for f in self.findings})

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "findings": [f.to_dict() for f in self.findings],
                "metrics": list(self.metrics), "unchecked": dict(self.unchecked),
                "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict) -> Diagnosis:
        """The inverse of ``to_dict``; a dict stored before coverage existed has none."""
        return cls(d["verdict"], [Finding.from_dict(f) for f in d["findings"]],
                   list(d.get("metrics") or []), dict(d.get("unchecked") or {}), d.get("reason"))


@dataclass
class RunContext:
    """What the app knows about a run besides its metrics; every field is optional.

    ``now``/``last_report_at`` are epoch seconds (wall clock) used by the lost-run check;
    ``seconds_per_step`` overrides the ``step_time`` metric when the app measured it.
    """

    max_completion_length: int | None = None
    beta: float | None = None
    num_generations: int | None = None
    is_live: bool = False
    now: float | None = None
    last_report_at: float | None = None
    seconds_per_step: float | None = None
    run_id: int | str | None = None  # only for log lines (which run a detector failed on)
    reward_weights: dict[str, float] | None = None  # component -> weight; 0 = monitor-only

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> RunContext:
        d = d or {}
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
