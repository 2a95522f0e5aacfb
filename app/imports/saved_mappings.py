"""Key mappings remembered per log source, so the next log of that source needs no ``--map``.

Why: a hand-written loop prints the same odd names in every run (``Score``, ``Div``); typing
the mapping once, ticking "remember", and having every later ``loop.log`` read the same way is
what makes a mapping stick. The source is the log's file name (or a folder's name) as the user
sent it: the same script writes the same name run after run. A mapping given with an import
always wins over a remembered one; it replaces the remembered one only when asked to
(``save_map``), never silently.

A mapping belongs to whoever saved it (issue 55: mappings were global per file name, and
another user's saved swap of reward and KL was read into the owner's next import): each user
reads, replaces and forgets only their own; ``owner`` 0 is the account-less caller
(development mode, the CLI on the server). Admins list everyone's.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.core.db import Base
from app.importers.base import LogFormatError
from app.importers.mapping import as_text, parse_map
from grpodeck.contract.fields import cleaned

MAX_SOURCE = 200


NO_ACCOUNT = 0  # the owner of mappings saved with no account (development mode, the CLI)


class SavedMapping(Base):
    """One remembered mapping (``A=a, B=b``, the form's own text) for a source name, of one
    owner (a user id; not a foreign key: a mapping outlives nothing but its owner's wish)."""

    __tablename__ = "saved_mappings"

    owner: Mapped[int] = mapped_column(Integer, primary_key=True, default=NO_ACCOUNT)
    source: Mapped[str] = mapped_column(String(MAX_SOURCE), primary_key=True)
    mapping: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now(), onupdate=func.now())


def source_key(name: str) -> str:
    """The name a mapping is remembered under: the file or folder name, cleaned and bounded."""
    return cleaned(name.strip())[:MAX_SOURCE]


def owner_of(user_id: int | None) -> int:
    """The owner key of a caller (``None``: no account)."""
    return NO_ACCOUNT if user_id is None else user_id


def _row(db: Session, source: str, user_id: int | None) -> SavedMapping | None:
    return db.get(SavedMapping, (owner_of(user_id), source_key(source)))


def remembered(db: Session, source: str, user_id: int | None) -> dict[str, str]:
    """The mapping this caller saved for ``source``, or an empty one. A stored mapping this
    version no longer accepts (two keys to one name, saved before that was refused) raises
    LogFormatError saying how to replace it (the import's 422): read, it would drop a key."""
    row = _row(db, source, user_id)
    if row is None:
        return {}
    try:
        return parse_map(row.mapping)
    except ValueError as exc:
        raise LogFormatError(row.source, f"the mapping remembered for this name "
                             f"({row.mapping[:200]}) is refused now: {exc}; send a mapping "
                             "and remember it to replace it") from None


def remember(db: Session, source: str, mapping: dict[str, str], user_id: int | None) -> None:
    """Save (or replace) this caller's mapping for ``source``; an empty mapping forgets it.
    Another user's mapping of the same name is never touched."""
    row = _row(db, source, user_id)
    if not mapping:
        if row is not None:
            db.delete(row)
        return
    if row is None:
        db.add(SavedMapping(owner=owner_of(user_id), source=source_key(source),
                            mapping=as_text(mapping)))
    else:
        row.mapping = as_text(mapping)
    db.flush()


def resolve(db: Session, source: str, given: dict[str, str], save: bool,
            user_id: int | None) -> tuple[dict[str, str], bool]:
    """(the mapping to read with, whether it is the remembered one): ``given`` when there is
    one (saved first when ``save``), else what this caller remembered for ``source``."""
    if save:
        remember(db, source, given, user_id)
    if given:
        return given, False
    saved = remembered(db, source, user_id)
    return saved, bool(saved)


def listing(db: Session, user_id: int | None, everyone: bool) -> list[SavedMapping]:
    """The caller's mappings by source name; ``everyone`` (an admin): every owner's."""
    query = select(SavedMapping).order_by(SavedMapping.source, SavedMapping.owner)
    if not everyone:
        query = query.where(SavedMapping.owner == owner_of(user_id))
    return list(db.scalars(query))
