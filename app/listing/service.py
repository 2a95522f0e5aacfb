"""The runs list at scale: filters, sort and server-side pagination in one page query.

Offset pagination on a whitelisted sort key (app/listing/sorting.py: run columns, and the
row's numbers as correlated subqueries) with ``id`` as the tie-break, so a page is stable; on
the indexed keys (``id``, ``name``, ``created_at``, ``status``) a page never reads more than
``offset + per_page`` index entries; one COUNT for the pager and one query for the page's tags
(no N+1). Tags live in ``run_tags`` (an index on ``tag``), so a tag filter is an index lookup.
Model and reward filters read the spec JSON, which both SQLite and PostgreSQL can do per row;
at thousands of runs that scan costs milliseconds (``bench/runs_list.py`` prints the times).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlencode

from sqlalchemy import Select, String, cast, delete, func, or_, select
from sqlalchemy.orm import Session

from app.listing.sorting import ALIASES, DIRECTIONS, SORTS, order_by
from app.runs.models import Run, RunTag

PER_PAGE = 50
MAX_PER_PAGE = 200
MAX_TAGS = 16
MAX_NOTE = 2_000
TAG_RE = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,39}$")
ARCHIVED = ("active", "archived", "all")
FILTERS = ("q", "status", "source", "verdict", "model", "dataset", "reward", "tag", "sweep")


class ListError(ValueError):
    """A filter value the list cannot use; the page shows it instead of guessing."""


@dataclass(frozen=True)
class ListQuery:
    q: str = ""
    status: str = ""
    source: str = ""
    verdict: str = ""
    model: str = ""
    dataset: str = ""
    reward: str = ""
    tag: str = ""
    sweep: str = ""  # a sweep id (POST /api/sweeps): the runs it launched, one per group size
    archived: str = "active"
    sort: str = "id"  # a key of sorting.SORTS (``newest``/``oldest`` are read as id desc/asc)
    dir: str = "desc"  # asc | desc; absent from the URL: the column's first direction
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListQuery:
        """From the URL's query string; unknown sorts and bad numbers are 4xx, not ignored."""
        values = {k: (params.get(k) or "").strip()[:200] for k in FILTERS}
        sort, direction = _sort(params.get("sort") or "id", params.get("dir") or "")
        archived = params.get("archived") or "active"
        if archived not in ARCHIVED:
            raise ListError(f"archived must be one of {', '.join(ARCHIVED)}")
        page = _int(params.get("page"), "page", 1, 1, 10**6)
        per_page = _int(params.get("per_page"), "per_page", PER_PAGE, 1, MAX_PER_PAGE)
        return cls(**values, archived=archived, sort=sort, dir=direction, page=page,
                   per_page=per_page)

    def url(self, **changes: object) -> str:
        """This list's query string with ``changes`` applied (defaults left out: short URLs)."""
        query = replace(self, **changes)  # type: ignore[arg-type]
        default = ListQuery()
        pairs = {k: getattr(query, k) for k in (*FILTERS, "archived", "sort", "dir", "page",
                                                 "per_page")
                 if getattr(query, k) != getattr(default, k)
                 or (k == "dir" and query.sort != default.sort)}  # a sort's dir is explicit
        return "?" + urlencode(pairs) if pairs else ""

    def toggled(self, sort: str) -> str:
        """The direction a click on ``sort``'s header asks for: the other one when the list is
        sorted by it, else the column's first direction."""
        if sort == self.sort:
            return "asc" if self.dir == "desc" else "desc"
        return SORTS[sort].first


def _sort(sort: str, direction: str) -> tuple[str, str]:
    """A whitelisted sort key and direction, or a ListError naming the choices."""
    if sort in ALIASES and not direction:
        return ALIASES[sort]
    sort = ALIASES.get(sort, (sort, ""))[0]
    if sort not in SORTS:
        raise ListError(f"unknown sort {sort[:40]!r}; use one of {', '.join(SORTS)}")
    if direction and direction not in DIRECTIONS:
        raise ListError(f"dir must be asc or desc, not {direction[:20]!r}")
    return sort, direction or SORTS[sort].first


def _int(raw: str | None, name: str, default: int, low: int, high: int) -> int:
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ListError(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise ListError(f"{name} must be between {low} and {high}")
    return value


def _filtered(query: ListQuery) -> Select[tuple[Run]]:
    stmt = select(Run)
    if query.archived == "active":
        stmt = stmt.where(Run.archived_at.is_(None))
    elif query.archived == "archived":
        stmt = stmt.where(Run.archived_at.is_not(None))
    for column, value in ((Run.status, query.status), (Run.source, query.source),
                          (Run.verdict, query.verdict), (Run.sweep_id, query.sweep)):
        if value:
            stmt = stmt.where(column == value)
    if query.model:
        stmt = stmt.where(Run.spec["model"].as_string() == query.model)
    if query.dataset:
        stmt = stmt.where(Run.spec["dataset"].as_string() == query.dataset)
    if query.reward:  # the spec is stored as json.dumps writes it, on both backends
        stmt = stmt.where(cast(Run.spec, String).contains(f'"name": "{query.reward}"',
                                                          autoescape=True))
    if query.tag:
        stmt = stmt.where(Run.id.in_(select(RunTag.run_id).where(RunTag.tag == query.tag.lower())))
    if query.q:
        text = or_(Run.name.icontains(query.q, autoescape=True),
                   Run.note.icontains(query.q, autoescape=True))
        if query.q.lstrip("#").isdigit() and len(query.q) < 10:
            text = or_(text, Run.id == int(query.q.lstrip("#")))
        stmt = stmt.where(text)
    return stmt


@dataclass(frozen=True)
class RunsPage:
    runs: Sequence[Run]
    total: int
    tags: dict[int, list[str]]
    query: ListQuery

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.per_page))


def page_of_runs(db: Session, query: ListQuery) -> RunsPage:
    """Three queries whatever the page holds: the count, the page, the page's tags."""
    stmt = _filtered(query)
    total = db.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0
    offset = (query.page - 1) * query.per_page
    runs = db.scalars(stmt.order_by(*order_by(query.sort, query.dir)).offset(offset)
                      .limit(query.per_page)).all()
    return RunsPage(runs, total, tags_of(db, [r.id for r in runs]), query)


def tags_of(db: Session, run_ids: Sequence[int]) -> dict[int, list[str]]:
    tags: dict[int, list[str]] = defaultdict(list)
    if run_ids:
        rows = db.execute(select(RunTag.run_id, RunTag.tag).where(RunTag.run_id.in_(run_ids))
                          .order_by(RunTag.tag))
        for run_id, tag in rows:
            tags[run_id].append(tag)
    return dict(tags)


def parse_tags(text: str) -> list[str]:
    """'Baseline, lr-sweep' -> ['baseline', 'lr-sweep']; a bad tag is refused with its reason."""
    tags = sorted({t.strip().lower() for t in re.split(r"[,\s]+", text) if t.strip()})
    bad = [t for t in tags if not TAG_RE.match(t)]
    if bad:
        raise ListError(f"tag {bad[0][:50]!r}: use 1-40 letters, digits, '.', '_', ':' or '-'")
    if len(tags) > MAX_TAGS:
        raise ListError(f"at most {MAX_TAGS} tags per run")
    return tags


def set_tags(db: Session, run: Run, tags: Sequence[str]) -> None:
    db.execute(delete(RunTag).where(RunTag.run_id == run.id))
    db.add_all(RunTag(run_id=run.id, tag=t) for t in tags)
    db.flush()


def set_note(run: Run, note: str) -> None:
    note = note.strip()
    if len(note) > MAX_NOTE:
        raise ListError(f"the note is {len(note)} characters; at most {MAX_NOTE}")
    if "\x00" in note:
        raise ListError("the note holds a NUL character")
    run.note = note or None


def set_archived(run: Run, archived: bool) -> None:
    run.archived_at = datetime.now(UTC) if archived else None


def facets(db: Session) -> dict[str, list[str]]:
    """Choices for the filter form's selects: the statuses, sources, verdicts, tags and sweeps
    in use."""
    out = {}
    for name, column in (("status", Run.status), ("source", Run.source),
                         ("verdict", Run.verdict), ("tag", RunTag.tag), ("sweep", Run.sweep_id)):
        out[name] = [v for v in db.scalars(select(column).distinct().order_by(column)) if v]
    return out
