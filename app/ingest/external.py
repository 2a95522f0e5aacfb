"""Register a run that a script trains itself (``POST /api/runs`` with a ``source``, and the
MLflow-compatible API): stored as an outside run whose token the report endpoints take."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from app.alerts.egress import check_destinations
from app.core.db import SessionDep
from app.listing import service as listing
from app.metrics.reading import Reading
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut


def _external_tags(body: ExternalRunIn) -> list[str]:
    """The body's tags plus ``group:NAME``, by the runs list's tag rules (else a 422)."""
    names = [*body.tags, *([f"group:{body.group}"] if body.group else [])]
    try:
        for name in names:  # each tag is one word: "a b" is refused, not split into two
            if not listing.TAG_RE.match(name.strip().lower()):
                raise listing.ListError(f"tag {name[:50]!r}: use 1-40 letters, digits, '.', "
                                        "'_', ':' or '-'")
        return listing.parse_tags(",".join(names))
    except listing.ListError as exc:
        raise RequestValidationError([{"type": "value_error", "msg": str(exc),
                                       "loc": ("body", "group" if body.group and not
                                               body.tags else "tags"),
                                       "input": names}]) from None


def register_and_answer(body: ExternalRunIn, request: Request, db: SessionDep,
                       user_id: int | None) -> ExternalRunOut:
    """A run a script trains itself, with the tags, group and alert rules it asked for."""
    run, token = register_external(body, db, user_id)
    db.commit()
    url = f"{str(request.base_url).rstrip('/')}/runs/{run.id}"
    return ExternalRunOut(id=run.id, token=token, url=url)


def register_external(body: ExternalRunIn, db: SessionDep,
                      user_id: int | None) -> tuple[Run, str]:
    """Store an outside run with its tags, group, alert rules and metric reading (its
    ``metric_map`` and ``vocabulary``), flushed, not committed: the
    one way every reporting path (this API, the MLflow-compatible one) creates it."""
    tags = _external_tags(body)
    spec = dict(body.spec)
    if body.alerts is not None:
        check_destinations(body.alerts.urls)
        spec["alerts"] = body.alerts.model_dump(mode="json")
    if body.group:
        spec["group"] = body.group
    run, token = service.create_external_run(db, name=body.name, spec=spec, created_by=user_id)
    if body.metric_map or body.vocabulary:  # every batch of the run is read by it
        run.metric_reading = Reading.start(body.vocabulary, body.metric_map).as_json()
    if tags:
        listing.set_tags(db, run, tags)
    return run, token
