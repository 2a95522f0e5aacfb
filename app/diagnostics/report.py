"""Human (text) and machine (JSON) renderings of a Diagnosis, for the CLI and the API."""

from __future__ import annotations

import json

from app.diagnostics.coverage import explain
from app.diagnostics.model import Diagnosis

_MARK = {"info": "i", "warning": "!", "critical": "!!"}


def to_json_dict(diagnosis: Diagnosis) -> dict:
    """``{"verdict", "findings": [{category, severity, first_step, last_step, summary,
    evidence, actions, metric}], "metrics": [names read], "unchecked": {check: metric},
    "reason"}``, JSON-safe (no NaN)."""
    return diagnosis.to_dict()


def coverage_lines(diagnosis: Diagnosis) -> list[str]:
    """"checked: ...; could not check: ..." (and why the verdict is unknown, when it is);
    nothing for a diagnosis built from findings alone, which knows no coverage."""
    if not (diagnosis.metrics or diagnosis.unchecked or diagnosis.reason):
        return []
    missing = "; ".join(f"{check} ({explain(value)})"
                        for check, value in sorted(diagnosis.unchecked.items()))
    lines = [f"Checked: {', '.join(diagnosis.metrics) or 'nothing (no known metric read)'}",
             f"Could not check: {missing or 'nothing'}"]
    return ([f"Why unknown: {diagnosis.reason}"] if diagnosis.reason else []) + lines


def format_text(diagnosis: Diagnosis) -> str:
    """Verdict line, then one block per finding (severity, category, steps, summary,
    evidence, actions)."""
    lines = [(f"Verdict: {diagnosis.verdict.upper()} ({len(diagnosis.findings)} finding"
             f"{'' if len(diagnosis.findings) == 1 else 's'})"), *coverage_lines(diagnosis)]
    for f in diagnosis.findings:
        steps = f"step {f.first_step}" if f.first_step == f.last_step else \
            f"steps {f.first_step}-{f.last_step}"
        lines += ["", f"[{_MARK[f.severity]}] {f.severity.upper()} {f.category} ({steps})"
                      + (f" on {f.metric}" if f.metric else ""),
                  f"    {f.summary}"]
        if f.evidence:
            ev = json.dumps(f.to_dict()["evidence"], sort_keys=True)
            lines.append(f"    evidence: {ev}")
        for a in f.actions:
            lines.append(f"    - {a}")
    return "\n".join(lines)
