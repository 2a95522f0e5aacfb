"""What a "Try this fix" run answers (issue 56).

A fix's clone kept its parent's name, and once launched nothing said which finding it was meant
to answer: two runs with one name on the runs list, and no way back from the new run to the
problem it tries. The form now names it after the change ("flat · fix: num_generations 4→8")
and the run remembers the finding (``runs.answers_finding_id``, ``runs.answers_category``):
its page says "answers finding … of run N" and links to that finding on the run it was found on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from sqlalchemy.orm import Session

from app.diagnostics.fixes import Change, Proposal
from app.health.models import FindingRecord
from app.runs.models import Run

FIX_MARK = " · fix: "
NAME_MAX = 120  # RunSpec.name's max_length


@dataclass(frozen=True)
class Answers:
    """The finding a launched run answers: its id and category (kept if the finding goes)."""

    finding_id: int
    category: str

    @classmethod
    def of(cls, record: FindingRecord | None) -> Answers | None:
        return cls(record.id, record.category) if record is not None else None

    @classmethod
    def carried(cls, run: Run) -> Answers | None:
        """What ``run`` answers, for the run launched from it (a smoke test's full run)."""
        if run.answers_finding_id is None or run.answers_category is None:
            return None
        return cls(run.answers_finding_id, run.answers_category)


def parent_finding(db: Session, parent: Run | None, raw: int | str | None
                   ) -> FindingRecord | None:
    """The finding ``raw`` (``?fix=`` or the form's hidden ``fix``) of ``parent``; None when
    none is asked for, a 404 for a finding of another run or none at all (the form's field is
    the browser's to send back: it is checked again, never trusted)."""
    if raw in (None, ""):
        return None
    try:
        finding_id = int(raw)  # type: ignore[arg-type]
    except ValueError:
        finding_id = 0
    record = db.get(FindingRecord, finding_id) if 0 < finding_id < 2**31 else None
    if parent is None or record is None or record.run_id != parent.id:
        raise HTTPException(404, f"finding {str(raw)[:20]} is not a finding of the run this "
                                 "form clones")
    return record


def _change_words(change: Change) -> str:
    """'num_generations 4→8'; a reward added as 'add unit_tests'."""
    if change.key == "rewards" and isinstance(change.new, list):
        had = {r.get("name") for r in change.old or [] if isinstance(r, dict)}
        added = [str(r.get("name")) for r in change.new
                 if isinstance(r, dict) and r.get("name") not in had]
        return "add " + ", ".join(added) if added else "rewards"
    return f"{change.key} {change.before}→{change.after}"


def fix_name(parent_name: str, proposal: Proposal) -> str:
    """The parent's name and the change: an earlier fix's mark is replaced, not stacked, and
    a long parent name is cut so the change stays whole."""
    base = parent_name.split(FIX_MARK)[0].strip()
    suffix = FIX_MARK + ", ".join(_change_words(c) for c in proposal.changes)
    room = NAME_MAX - len(suffix)
    if len(base) > room:
        base = base[:max(room - 1, 0)] + "…"
    return (base + suffix)[:NAME_MAX]


def answered(db: Session, run: Run) -> dict[str, Any] | None:
    """What the run page says of the finding ``run`` answers: its category, its id and the run
    it was found on (None when that finding went with its run)."""
    if run.answers_finding_id is None:
        return None
    record = db.get(FindingRecord, run.answers_finding_id)
    if record is not None and record.category != run.answers_category:
        record = None  # the id was reused after that finding's run was deleted
    return {"finding_id": run.answers_finding_id,
            "category": (run.answers_category or "").replace("_", " "),
            "run_id": record.run_id if record is not None else None}
