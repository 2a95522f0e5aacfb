"""A JSON request body parsed and validated in one pass by pydantic's own parser.

FastAPI reads a model body with ``json.loads`` and then validates the Python objects: for the
report API's metric batches (hundreds of rows of ~25 numbers) those two steps were ~19 % of the
handler (py-spy, bench/ingest.py "via Sender"); ``model_validate_json`` does both in Rust in
about 60 % of the time, with the same result (NaN, ``Infinity`` and ``1e400`` included). The
route takes the model from ``Depends(json_body(Model))``; ``openapi_body(Model)`` documents it
as FastAPI would, and ``add_schemas`` puts the model's schemas into the OpenAPI components.
Errors keep FastAPI's 422 shape (each ``loc`` starts with ``"body"``); JSON that only
``json.loads`` reads (lone surrogates) takes FastAPI's own path, so nothing it took is refused.

``loads`` is that ``json.loads``, for every body read by hand (here and MLflow's): without it a
body nested 100,000 levels deep raised RecursionError, and a 5,000-digit integer the plain
ValueError of Python's int-from-text digit limit, both a 500 with a traceback (issue 55). It
refuses what pydantic's parser refuses too, with the reason: nesting deeper than
``MAX_DEPTH`` (pydantic's own recursion limit) and integers longer than the digit limit.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

M = TypeVar("M", bound=BaseModel)
_REF = "#/components/schemas/{model}"
_DOCUMENTED: list[type[BaseModel]] = []
# A body this large (a metric batch of thousands of rows, captured rollouts: up to 8 MB) is
# parsed in a worker thread: tens of milliseconds of parsing would stall every other request.
THREAD_ABOVE_BYTES = 256 * 1024
MAX_DEPTH = 200  # pydantic's JSON parser refuses deeper nesting ("recursion limit exceeded")


class NotJson(ValueError):
    """A body ``loads`` will not read: where (a character offset) and why, for the client."""

    def __init__(self, pos: int, why: str) -> None:
        super().__init__(why)
        self.pos, self.why = pos, why


def json_body(model: type[M]) -> Callable[[Request], Awaitable[M]]:
    """A dependency that returns the request body as ``model`` (422 when it is not one)."""

    async def parse(request: Request) -> M:
        body = await request.body()
        if len(body) > THREAD_ABOVE_BYTES:  # megabytes of JSON: parsed off the event loop
            return await run_in_threadpool(_parse, model, body)
        return _parse(model, body)

    return parse


def _parse(model: type[M], body: bytes) -> M:
    """``body`` as ``model``: pydantic's parser, else ``json.loads`` for what only it reads."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" for e in exc.errors()):
            raise _refused(exc) from None
    # JSON pydantic's parser refuses but json.loads reads (a lone surrogate such as \ud800,
    # which the model's text fields then clean): FastAPI's own path, with its errors
    try:
        data = loads(body)
    except NotJson as exc:
        raise _not_json(exc.pos, exc.why) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _refused(exc) from None


def loads(body: bytes) -> Any:
    """``json.loads``, raising ``NotJson`` with the reason for anything it will not read, its
    crashes included (see the module docstring): no other exception comes out."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise NotJson(exc.pos, exc.msg) from None
    except UnicodeDecodeError as exc:  # json.loads guesses UTF-16/32 from NULs, then fails
        raise NotJson(exc.start, f"not UTF-8 text: {exc.reason}") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # int() of a number past the digit limit: not a JSONDecodeError
        raise NotJson(0, f"a number of more than {sys.get_int_max_str_digits()} digits") \
            from None
    if depth(data) > MAX_DEPTH:  # parsed (fewer levels than the recursion limit), too deep
        raise _too_deep()
    return data


def _too_deep() -> NotJson:
    return NotJson(0, f"JSON nested deeper than {MAX_DEPTH} levels")


def depth(value: object, limit: int = MAX_DEPTH) -> int:
    """How deep arrays and objects nest in ``value``, counted without recursion (the point:
    a recursive count crashes where the parser did) and stopping once past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children
                         if isinstance(child, dict | list))
    return deepest


def _not_json(pos: int, why: str) -> RequestValidationError:
    return RequestValidationError([{
        "type": "json_invalid", "loc": ("body", pos), "msg": "JSON decode error",
        "input": {}, "ctx": {"error": why}}])


def _refused(exc: ValidationError) -> RequestValidationError:
    return RequestValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)])


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route whose body comes from ``json_body(model)``."""
    if model not in _DOCUMENTED:
        _DOCUMENTED.append(model)
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": _REF.format(model=model.__name__)}}}}}


def add_schemas(app: FastAPI) -> None:
    """Make ``app.openapi()`` also hold the schemas of the models ``openapi_body`` named (and
    the models they use), where FastAPI has not put them already."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _DOCUMENTED:
            own = model.model_json_schema(ref_template=_REF, mode="validation")
            for name, definition in {**own.pop("$defs", {}), model.__name__: own}.items():
                components.setdefault(name, definition)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
