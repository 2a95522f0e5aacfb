"""The datasets page: what is there, and a form to upload another."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core.config import get_settings
from app.core.templating import templates
from app.datasets import store
from app.datasets.upload import UploadTooLarge, read_upload

router = APIRouter(include_in_schema=False)


def _context(**extra: Any) -> dict[str, Any]:
    settings = get_settings()
    return {"names": store.list_names(settings.datasets_dir), "error": None, "stored": None,
            "max_mb": settings.dataset_upload_max_bytes / (1024 * 1024), **extra}


@router.get("/datasets", response_class=HTMLResponse)
def datasets_page(request: Request) -> Response:
    return templates.TemplateResponse(request, "datasets/index.html", _context())


@router.post("/datasets", response_class=HTMLResponse)
async def upload_form(request: Request) -> Response:
    try:
        upload = await read_upload(request)
        stored = await run_in_threadpool(  # parsing a 20 MB JSON file: off the event loop
            store.save, get_settings().datasets_dir, upload.filename, upload.data)
    except store.DatasetError as exc:
        code = 413 if isinstance(exc, UploadTooLarge) else 409 if isinstance(
            exc, store.DatasetExists) else 422
        return templates.TemplateResponse(request, "datasets/index.html",
                                          _context(error=str(exc)), status_code=code)
    return templates.TemplateResponse(request, "datasets/index.html", _context(stored=stored),
                                      status_code=201)
