"""The runs list page (`/runs`): filters, sort, pages, tags, notes, archive, delete, compare.

Every control is a plain GET form or POST form that htmx enhances: the filter form swaps the
table and pushes the URL (so a filtered list can be shared), row actions re-render the table
with the filters they were made under (the ``list`` field carries that query string).
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity
from app.compare.views import MAX_RUNS as COMPARE_MAX
from app.compare.views import MIN_RUNS as COMPARE_MIN
from app.core.db import SessionDep
from app.core.templating import templates, with_toast
from app.listing import row_numbers
from app.listing import service as listing
from app.listing.service import ListError, ListQuery
from app.listing.sorting import SORTS
from app.runs import lifecycle
from app.runs.lookup import run_or_404
from app.runs.models import Run
from app.runs.progress import progress

router = APIRouter(include_in_schema=False)


def _context(db: SessionDep, query: ListQuery, flash: str | None = None) -> dict[str, Any]:
    page = listing.page_of_runs(db, query)
    return {"page": page, "runs": page.runs, "q": query, "flash": flash,
            "progress": {r.id: progress(r) for r in page.runs},
            "numbers": row_numbers.row_numbers(db, page.runs),
            "columns": row_numbers.COLUMNS, "hidden_columns": row_numbers.DEFAULT_HIDDEN,
            "any_live": any(lifecycle.is_live(r) for r in page.runs),
            "facets": listing.facets(db), "sorts": SORTS,
            "compare_min": COMPARE_MIN, "compare_max": COMPARE_MAX}


def _render(request: Request, db: SessionDep, template: str, params: Any,
            flash: str | None = None, status_code: int = 200) -> Response:
    try:
        query = ListQuery.parse(params)
    except ListError as exc:
        query, flash, status_code = ListQuery(), str(exc), 400
    return templates.TemplateResponse(request, template, _context(db, query, flash),
                                      status_code=status_code)


@router.get("/", response_class=RedirectResponse)
def home() -> RedirectResponse:
    """The front door is the runs list."""
    return RedirectResponse("/runs", status_code=303)


def _swapping(request: Request) -> bool:
    """An htmx request that swaps part of a shown page: not a plain load (address bar,
    reload, bookmark) and not htmx restoring a history entry, which both need a whole page."""
    return (request.headers.get("hx-request") == "true"
            and request.headers.get("hx-history-restore-request") != "true")


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, db: SessionDep) -> Response:
    """The whole list. The filter form asks for it too (htmx picks the table out of it), so
    the address it pushes is this page's; the header gives that address without the form's
    empty and default fields (a short link to share)."""
    response = _render(request, db, "runs/list.html", request.query_params)
    if _swapping(request) and response.status_code == 200:
        response.headers["HX-Push-Url"] = "/runs" + ListQuery.parse(request.query_params).url()
    return response


@router.get("/runs/_table", response_class=HTMLResponse)
def runs_table(request: Request, db: SessionDep) -> Response:
    """The table alone, for a swap; opened any other way (an address pushed before issue 56,
    a bookmark of it) it sends the browser to the whole page with the same filters."""
    if not _swapping(request):
        query = request.url.query
        return RedirectResponse("/runs" + (f"?{query}" if query else ""), status_code=303)
    return _render(request, db, "runs/_table.html", request.query_params)


async def _form(request: Request) -> dict[str, str]:
    return {k: str(v) for k, v in (await request.form()).items()}


def after_change(request: Request, db: SessionDep, form: dict[str, str],
                  flash: str | None = None, status_code: int = 200) -> Response:
    """htmx: the table again, under the filters the change was made from; no JS: back there."""
    back = form.get("list", "").lstrip("?")
    if request.headers.get("hx-request") == "true":
        return _render(request, db, "runs/_table.html", dict(parse_qsl(back)), flash, status_code)
    if status_code >= 400:
        return HTMLResponse(f'<div class="alert critical">{html.escape(flash or "")}</div>',
                            status_code=status_code)
    return RedirectResponse(f"/runs?{back}" if back else "/runs", status_code=303)


def _refused(run: Run, identity: CurrentIdentity) -> str | None:
    return identity.manage_refusal(run)


@router.post("/runs/{run_id}/annotate", response_class=HTMLResponse)
async def annotate(run_id: int, request: Request, db: SessionDep,
                   identity: CurrentIdentity) -> Response:
    """Set a run's tags (comma or space separated) and note."""
    run = run_or_404(db, run_id)
    form = await _form(request)
    if (reason := _refused(run, identity)) is not None:
        return after_change(request, db, form, reason, 403)
    try:
        tags = listing.parse_tags(form.get("tags", ""))
        listing.set_note(run, form.get("note", ""))
    except ListError as exc:
        db.rollback()
        return after_change(request, db, form, f"run {run_id}: {exc}", 422)
    listing.set_tags(db, run, tags)
    db.commit()
    return with_toast(after_change(request, db, form), f"Saved the tags and note of run {run_id}.")


@router.post("/runs/{run_id}/archive", response_class=HTMLResponse)
async def archive(run_id: int, request: Request, db: SessionDep,
                  identity: CurrentIdentity) -> Response:
    """Archive (``archived=1``) or restore (``archived=0``) a run: archived runs keep all their
    data and leave the default list."""
    run = run_or_404(db, run_id)
    form = await _form(request)
    if (reason := _refused(run, identity)) is not None:
        return after_change(request, db, form, reason, 403)
    archived = form.get("archived", "1") == "1"
    listing.set_archived(run, archived)
    db.commit()
    done = "archived" if archived else "restored"
    return with_toast(after_change(request, db, form), f"Run {run_id} {done}.")
