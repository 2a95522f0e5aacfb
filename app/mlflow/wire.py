"""The request bodies this subset reads and the answers it gives, in MLflow's JSON shapes
(``mlflow/protos/service.proto``: int64 fields arrive as strings, as protobuf JSON writes them).
Fields the client sends that the Deck has no use for (``user_id``, ``timestamp``, ``model_id``
...) are accepted and ignored."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from app.mlflow.errors import invalid
from app.mlflow.mapping import DECK_TO_MLFLOW, DEFAULT_EXPERIMENT_NAME, experiment_id_of
from app.runs.models import Run

MAX_ITEMS = 1_000  # MLflow's own log-batch limit (metrics + params + tags)


class KeyValue(BaseModel):
    key: str = Field(min_length=1, max_length=250)
    value: str = Field(default="", max_length=8_000)


class MetricIn(BaseModel):
    key: str = Field(min_length=1, max_length=250)
    value: float | str
    step: int = 0


class CreateExperiment(BaseModel):
    name: str = Field(min_length=1, max_length=500)


class CreateRun(BaseModel):
    experiment_id: str = "0"
    run_name: str | None = Field(None, max_length=250)
    tags: list[KeyValue] = Field(default_factory=list, max_length=MAX_ITEMS)


class RunRef(BaseModel):
    run_id: str | None = None
    run_uuid: str | None = None  # the older spelling; the client sends both

    @property
    def id(self) -> str:
        return self.run_id or self.run_uuid or ""


class LogBatch(RunRef):
    metrics: list[MetricIn] = Field(default_factory=list, max_length=MAX_ITEMS)
    params: list[KeyValue] = Field(default_factory=list, max_length=100)
    tags: list[KeyValue] = Field(default_factory=list, max_length=100)


class LogMetric(RunRef, MetricIn):
    pass


class LogOne(RunRef, KeyValue):
    """log-parameter and set-tag: one key and its value."""


class UpdateRun(RunRef):
    status: str | None = None
    run_name: str | None = Field(None, max_length=250)


Body = TypeVar("Body", bound=BaseModel)


def parse(model: type[Body], data: Any) -> Body:
    """The body as ``model``, or MLflow's 400 naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise invalid(f"{where}: {first['msg']}") from None


def _millis(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


def experiment_json(group: str | None) -> dict[str, Any]:
    return {"experiment_id": experiment_id_of(group), "name": group or DEFAULT_EXPERIMENT_NAME,
            "artifact_location": "", "lifecycle_stage": "active", "tags": []}


def run_info(run: Run) -> dict[str, Any]:
    info: dict[str, Any] = {
        "run_id": str(run.id), "run_uuid": str(run.id), "run_name": run.name,
        "experiment_id": experiment_id_of((run.spec or {}).get("group")),
        "status": DECK_TO_MLFLOW.get(run.status, "RUNNING"), "artifact_uri": "",
        "lifecycle_stage": "active", "user_id": ""}
    for field, moment in (("start_time", run.started_at), ("end_time", run.finished_at)):
        if (millis := _millis(moment)) is not None:
            info[field] = str(millis)
    return info


def run_json(run: Run, tags: list[str]) -> dict[str, Any]:
    """The run with its params (the config, as strings) and tags (``key:value`` split back);
    metric values are not repeated here: ``/api/runs/{id}/metrics`` has them."""
    params = [{"key": k, "value": str(v)} for k, v in sorted((run.spec or {}).items())]
    kv = [dict(zip(("key", "value"), (*t.split(":", 1), "")[:2], strict=True)) for t in tags]
    kv.append({"key": "mlflow.runName", "value": run.name})
    return {"info": run_info(run), "data": {"metrics": [], "params": params, "tags": kv},
            "inputs": {}}
