"""The run page's Devices panel (issue 26): what the run runs on, and each rank's progress.

Why from the log: the worker already ships its output; the lines read here are the markers of
``grpodeck.contract.log_markers`` (the supervisor's preamble and the ranks' lines, as the
supervisor shipped and signed them in the markers stream: such a line printed to stdout or
stderr is plain log text), so the panel needs no table and works for any run whose log is stored. The
failed rank the supervisor names in the run's error (``rank N: ...``, sent with the token-bound
``finished`` call) counts as well: a rank killed hard prints no line of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.logs import service as log_service
from app.runs.models import Run
from grpodeck.contract.log_markers import (
    MARKERS_STREAM,
    Preamble,
    RankState,
    parse_ranks,
    parse_vouched,
    verified,
)

MAX_SHOWN_RANKS = 64  # a page shows this many ranks at most
_ERROR_RANK = re.compile(r"rank (\d{1,4})(?::| failed)")


@dataclass
class DevicesPanel:
    processes: int
    facts: list[tuple[str, str]] = field(default_factory=list)  # (label, value), shown in order
    ranks: dict[int, RankState] = field(default_factory=dict)  # empty for one process


def _processes(spec: dict[str, Any]) -> int:
    n = spec.get("num_processes")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


def _facts(spec: dict[str, Any], processes: int, preamble: Preamble) -> list[tuple[str, str]]:
    facts: list[tuple[str, str]] = []
    if processes > 1:
        facts += [("Processes", str(processes)),
                  ("Distributed", str(spec.get("distributed", "ddp"))),
                  ("Mixed precision", str(spec.get("mixed_precision", "auto")))]
    if spec.get("use_vllm") is True:
        facts.append(("vLLM", str(spec.get("vllm_mode", "colocate"))))
    if preamble.visible is not None:
        facts.append(("Devices", f"slot {preamble.slot}: CUDA_VISIBLE_DEVICES={preamble.visible}"))
    if preamble.devices is not None:
        facts.append(("Worker devices", preamble.devices))
    return facts


def vouched_preamble(db: Session, run: Run) -> Preamble:
    """The preamble the run's supervisor signed at the start of the markers stream. Never
    stdout's opening lines (issue 55): an outside run's script, a child on a worker without
    device slots, or a token holder posting at offset 0 writes those."""
    opening = log_service.opening(db, run.id, MARKERS_STREAM)
    return parse_vouched(verified(opening, run.marker_key))


def devices_panel(db: Session, run: Run) -> DevicesPanel | None:
    """The panel's content, or None when there is nothing to show: a single-process run that
    got no device slot (a plain CPU worker)."""
    spec = run.spec or {}
    processes = _processes(spec)
    preamble = vouched_preamble(db, run)
    if processes < 2 and preamble.visible is None:
        return None
    ranks: dict[int, RankState] = {}
    if processes > 1:
        signed = log_service.stream_tail(db, run.id, MARKERS_STREAM)
        ranks = parse_ranks(verified(signed, run.marker_key), processes, MAX_SHOWN_RANKS)
        m = _ERROR_RANK.match(run.error or "") if run.status == "failed" else None
        if m and int(m[1]) in ranks:
            ranks[int(m[1])].failed = True
    return DevicesPanel(processes, _facts(spec, processes, preamble), ranks)
