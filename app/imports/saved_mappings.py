"""Key mappings remembered per log source, so the next log of that source needs no ``--map``.

Why: a hand-written loop prints the same odd names in every run (``Score``, ``Div``); typing
the mapping once, ticking "remember", and having every later ``loop.log`` read the same way is
what makes a mapping stick. The source is the log's file name (or a folder's name) as the user
sent it: the same script writes the same name run after run. A mapping given with an import
always wins over a remembered one; it replaces the remembered one only when asked to
(``save_map``), never silently.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, String, Text, func
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.core.db import Base
from app.importers.mapping import as_text, parse_map
from grpodeck.contract.fields import cleaned

MAX_SOURCE = 200


class SavedMapping(Base):
    """One remembered mapping (``A=a, B=b``, the form's own text) for a source name."""

    __tablename__ = "saved_mappings"

    source: Mapped[str] = mapped_column(String(MAX_SOURCE), primary_key=True)
    mapping: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now(), onupdate=func.now())


def source_key(name: str) -> str:
    """The name a mapping is remembered under: the file or folder name, cleaned and bounded."""
    return cleaned(name.strip())[:MAX_SOURCE]


def remembered(db: Session, source: str) -> dict[str, str]:
    """The mapping saved for ``source``, or an empty one."""
    row = db.get(SavedMapping, source_key(source))
    return parse_map(row.mapping) if row is not None else {}


def remember(db: Session, source: str, mapping: dict[str, str]) -> None:
    """Save (or replace) the mapping for ``source``; an empty mapping forgets it."""
    row = db.get(SavedMapping, source_key(source))
    if not mapping:
        if row is not None:
            db.delete(row)
        return
    if row is None:
        db.add(SavedMapping(source=source_key(source), mapping=as_text(mapping)))
    else:
        row.mapping = as_text(mapping)
    db.flush()


def resolve(db: Session, source: str, given: dict[str, str], save: bool
            ) -> tuple[dict[str, str], bool]:
    """(the mapping to read with, whether it is the remembered one): ``given`` when there is
    one (saved first when ``save``), else what was remembered for ``source``."""
    if save:
        remember(db, source, given)
    if given:
        return given, False
    saved = remembered(db, source)
    return saved, bool(saved)
