"""create_app(): routers, our static files and the front-end assets from their packages."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette_compress import CompressMiddleware
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.alerts import api as alerts_api
from app.alerts import views as alert_views
from app.artifacts import api as artifacts_api
from app.artifacts import views as artifact_views
from app.auth import views as auth_views
from app.compare import views as compare
from app.core import access_log, busy, json_body, limits
from app.core.assets import MOUNTS, HashedStaticFiles
from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.core.docs import install_docs
from app.core.error_pages import install as install_error_pages
from app.core.templating import templates
from app.datasets import api as datasets_api
from app.datasets import views as dataset_views
from app.dryruns import api as dry_runs_api
from app.health import api as health_api
from app.imports import api as import_api
from app.imports import views as import_views
from app.ingest import report_api
from app.ingest.fast_path import FastPath
from app.launch import api as launch_api
from app.launch import dry_run_views, presets, rewards_api, smoke, sweeps
from app.launch import views as launch_views
from app.listing import api as listing_api
from app.listing import views as list_views
from app.logs import views as log_views
from app.metrics import api as metrics_api
from app.metrics.settler import start_here
from app.mlflow import api as mlflow_api
from app.page_context import install as install_page_context
from app.processes import api as processes_api
from app.rollouts import api as rollouts_api
from app.rollouts import views as rollout_views
from app.run_page import api as runs_api
from app.run_page import views
from app.security import install as install_security


def trust_forwarded_headers(front: ASGIApp) -> ASGIApp:
    """X-Forwarded-For/-Proto only from the proxies GRPODECK_TRUSTED_PROXIES lists (outermost,
    around the front door too, so the sign-in throttle and every log see the client the proxy
    names). Without the setting the headers are ignored: anyone can send them, and believing
    them from loopback (uvicorn's default, which `grpodeck serve` turns off) let any local
    process, or anything a local proxy forwards, pick a fresh address for every guessed
    password."""
    trusted = [host.strip() for host in get_settings().trusted_proxies.split(",") if host.strip()]
    return ProxyHeadersMiddleware(front, trusted_hosts=trusted) if trusted else front


class DeckApp(FastAPI):
    """FastAPI with a front door: ``front`` (the forwarded-headers check where configured, then
    the fast path for a well-formed metric batch, ``app/ingest/fast_path.py``) sees each request
    before FastAPI's own entrance does, and hands it in through ``framework``.

    Why: FastAPI's entrance costs every request its telemetry check, then its error, telemetry
    and body-limit middlewares; behind them a one-step report took 2.45 ms and an MLflow
    log-batch 2.81, in front 2.18 and 2.41 (bench/ingest.py A/B medians, docs/benchmarks.md).
    What those layers give a batch the fast path keeps itself: the body limit, and the regular
    app's answer (its 500 included) for anything but a stored batch or a lock wait. FastAPI's
    native OpenTelemetry, where a deployment turns it on, does not trace the batches the fast
    path stores."""

    front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (self.front or self.framework)(scope, receive, send)

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own entrance: middlewares, routing, the routes."""
        await super().__call__(scope, receive, send)


def _favicon() -> FileResponse:
    """Browsers ask for /favicon.ico whatever the page links: answer with the drawn SVG rather
    than a 404 in every page's console."""
    return FileResponse(MOUNTS["app"] / "favicon.svg", media_type="image/svg+xml",
                        headers={"Cache-Control": "public, max-age=86400"})


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """A served process (not an in-process test client) runs the background settler, unless
    the scheduler does: live runs' waiting steps are spread off the read path
    (``app/metrics/settler.py``); and its access log leaves out the routine reports that
    succeeded (``app/core/access_log.py``)."""
    settings = get_settings()
    quiet = access_log.quiet_routine_reports(settings.access_log_reports)
    settler = start_here("web", get_sessionmaker(), settings.settle_seconds, settings.settle_in)
    try:
        yield
    finally:
        if settler is not None:
            settler.stop()
        access_log.restore(quiet)


def create_app() -> DeckApp:
    app = DeckApp(title="GRPO Deck", version="0.1.0", docs_url=None,
                  redoc_url=None, lifespan=lifespan,
                  description="Launch GRPO runs and learn early, with evidence, how they are doing.")
    install_page_context(templates)
    limits.install(app)
    install_error_pages(app)  # after limits: HTML 404/422/500 pages for browsers (413 stays)
    busy.install(app)  # a database lock wait is 503 + Retry-After, not a 500
    json_body.add_schemas(app)  # the bodies parsed by pydantic itself, in /docs too
    app.include_router(report_api.router)
    app.include_router(launch_api.router)
    app.include_router(listing_api.router)
    app.include_router(runs_api.router)
    app.include_router(metrics_api.router)
    app.include_router(presets.router)
    app.include_router(rewards_api.router)
    app.include_router(sweeps.api)
    app.include_router(sweeps.pages)
    app.include_router(dry_runs_api.router)
    app.include_router(launch_api.dry_runs)
    app.include_router(dry_runs_api.report_router)
    app.include_router(dry_run_views.router)
    app.include_router(health_api.router)
    app.include_router(processes_api.router)
    app.include_router(processes_api.health_router)
    app.include_router(datasets_api.router)
    app.include_router(dataset_views.router)
    app.include_router(rollouts_api.router)
    app.include_router(rollout_views.router)
    app.include_router(alerts_api.router)
    app.include_router(alert_views.router)
    app.include_router(import_api.router)
    app.include_router(import_views.router)  # before views: /runs/import is not a run id
    app.include_router(list_views.router)
    app.include_router(compare.router)  # before views: /runs/compare is not a run id
    app.include_router(smoke.router)
    app.include_router(log_views.router)
    app.include_router(artifacts_api.upload_router)
    app.include_router(artifacts_api.router)
    app.include_router(artifact_views.router)
    app.include_router(launch_views.router)  # before views: /runs/new is not a run id
    app.include_router(views.router)
    app.include_router(auth_views.router)
    mlflow_api.install(app)
    install_security(app, token_routers=[report_api.router, dry_runs_api.report_router,
                                                processes_api.router,
                                                artifacts_api.upload_router],
                     own_auth_routers=[mlflow_api.router])
    install_docs(app)
    app.add_api_route("/favicon.ico", _favicon, methods=["GET", "HEAD"], include_in_schema=False)
    app.mount("/static/app", HashedStaticFiles(directory=MOUNTS["app"]), name="static")
    app.mount("/static/htmx", HashedStaticFiles(directory=MOUNTS["htmx"], check_dir=False),
              name="htmx")
    app.mount("/static/plotly", HashedStaticFiles(directory=MOUNTS["plotly"]), name="plotly")
    # Compressed pages, JSON and static files alike (plotly-cartesian.min.js: 1.5 MB -> about
    # 0.5 MB); added last, so it wraps everything, the security headers included. zstd where
    # the client takes it (browsers since 2024, httpx with zstandard): a 100k-point series
    # (2.5 MB of JSON) took ~30 ms to gzip at level 4, most of its answer (issue 57); then
    # brotli, then gzip at level 4 (a polled 300 KB charts panel: 5 ms instead of 13 at 6).
    app.add_middleware(CompressMiddleware, minimum_size=1_000, zstd_level=1, brotli_quality=4,
                       gzip_level=4)
    # A well-formed metric batch (the report API's, or MLflow's log-batch) skips FastAPI's
    # entrance, the middlewares above and the routing (the one-step-per-request floor);
    # everything else about it goes the regular way.
    app.front = trust_forwarded_headers(
        FastPath(app.framework, routes=[report_api.METRICS_ROUTE, mlflow_api.LOG_BATCH_ROUTE]))
    return app


app = create_app()
# What the imports and create_app() built lives as long as the process: frozen out of the
# collector's sight, a full collection no longer walks it. Ingest allocates a tuple per point,
# and the full collections that set off cost about three times building them (bench/ingest.py).
gc.freeze()
