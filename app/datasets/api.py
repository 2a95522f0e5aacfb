"""JSON API for datasets: list what runs may train on, upload a new one."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from app.core.config import get_settings
from app.datasets import store
from app.datasets.upload import UploadTooLarge, read_upload

router = APIRouter(prefix="/api/datasets", tags=["datasets"])


class DatasetOut(BaseModel):
    name: str
    rows: int
    columns: list[str]
    size_bytes: int


@router.get("", response_model=list[str])
def list_datasets() -> list[str]:
    """Names usable as a run spec's ``dataset``."""
    return store.list_names(get_settings().datasets_dir)


@router.post("", response_model=DatasetOut, status_code=status.HTTP_201_CREATED,
             openapi_extra={"requestBody": {"content": {"multipart/form-data": {"schema": {
                 "type": "object", "required": ["file"],
                 "properties": {"file": {"type": "string", "format": "binary"},
                                "name": {"type": "string"}}}}}}})
async def upload_dataset(request: Request) -> DatasetOut:
    """Store a .jsonl/.json file with a ``prompt`` column; then launch with ``dataset=<name>``."""
    try:
        upload = await read_upload(request)
        stored = await run_in_threadpool(  # parsing a 20 MB JSON file: off the event loop
            store.save, get_settings().datasets_dir, upload.filename, upload.data)
    except UploadTooLarge as exc:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, str(exc)) from None
    except store.DatasetExists as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except store.DatasetError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    return DatasetOut(**vars(stored))
