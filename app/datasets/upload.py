"""Read one uploaded dataset file from a multipart request, refusing large ones early.

Shared by the JSON API and the browser form. A body whose declared length is already over the
limit is refused before any of it is read; a body without a length is read up to the limit only.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import UploadFile

from app.core.config import get_settings
from app.core.limits import FORM_OVERHEAD
from app.datasets import store


class UploadTooLarge(store.DatasetError):
    pass


@dataclass(frozen=True)
class Upload:
    filename: str
    data: bytes


def _limit_text(limit: int) -> str:
    return f"{limit / (1024 * 1024):.0f} MB" if limit >= 1024 * 1024 else f"{limit} bytes"


async def read_upload(request: Request) -> Upload:
    """The ``file`` part (and an optional ``name`` to store it under) of a multipart body."""
    limit = get_settings().dataset_upload_max_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + FORM_OVERHEAD:
        raise UploadTooLarge(f"the file is larger than {_limit_text(limit)}")
    form = await request.form(max_files=1, max_fields=4)
    file = form.get("file")
    if not isinstance(file, UploadFile) or not file.filename:
        raise store.DatasetError("choose a .jsonl or .json file to upload")
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise UploadTooLarge(f"the file is larger than {_limit_text(limit)}")
    name = form.get("name")
    chosen = name.strip() if isinstance(name, str) and name.strip() else file.filename
    return Upload(chosen, data)
