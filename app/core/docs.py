"""The API reference at /docs: Swagger UI from its npm package (swagger-ui-dist), started by a
static script, so it runs offline and under the Content-Security-Policy (FastAPI's default
page loads a CDN and starts it with an inline script)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from app.core.resources import data_path
from app.core.templating import templates

SWAGGER_DIST = data_path("node_modules/swagger-ui-dist")


def install_docs(app: FastAPI) -> None:
    app.mount("/static/swagger", StaticFiles(directory=SWAGGER_DIST, check_dir=False),
              name="swagger")

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def docs(request: Request) -> Response:
        return templates.TemplateResponse(request, "docs.html", {"openapi_url": app.openapi_url})
