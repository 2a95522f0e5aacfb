"""`grpodeck`: serve the dashboard, run a worker, launch a spec file, diagnose a log."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import typer

from app.auth.cli import refuse_unsafe_bind, user_cli
from app.core.config import get_settings
from app.core.db import migrate

if TYPE_CHECKING:
    import httpx

cli = typer.Typer(help="GRPO Deck: launch GRPO runs and diagnose their health.",
                  no_args_is_help=True, add_completion=False)
cli.add_typer(user_cli, name="user")


@cli.command("migrate")
def migrate_cmd() -> None:
    """Apply database migrations (alembic upgrade head)."""
    migrate()


@cli.command()
def serve(host: str = "127.0.0.1", port: int = 8000, no_migrate: bool = False) -> None:
    """Migrate, then serve the dashboard and the API."""
    import uvicorn

    if not no_migrate:
        migrate()
    refuse_unsafe_bind(host)
    # Idle connections stay open well past clients' own 5 s expiry (httpx): at equal timeouts a
    # reporter's request can meet the server closing that connection (ReadError in bench/load.py).
    # proxy_headers=False: uvicorn would believe X-Forwarded-For from 127.0.0.1 by default; the
    # app believes it only from GRPODECK_TRUSTED_PROXIES (app.main.trust_forwarded_headers).
    uvicorn.run("app.main:app", host=host, port=port, log_level="info", timeout_keep_alive=65,
                proxy_headers=False)


def node_name(name: str | None = None) -> str:
    """The Celery node name (``-n``): ``name@<host>``, by default ``grpodeck-<pid>@<host>``.
    Why: Celery's default ``celery@<host>`` is the same for every worker on a host, so
    ``celery inspect ping`` counted two workers as one node and remote control reached one of
    them (issue 55); a live process's pid is unique on its host. ``name`` may carry its own
    ``@host``."""
    name = name or f"grpodeck-{os.getpid()}"
    return name if "@" in name else f"{name}@%h"


# What the ``worker`` extra adds (pyproject.toml) and every training imports; the dashboard
# (``pip install grpodeck``) runs without them.
TRAINING_STACK = ("torch", "transformers", "trl")
WORKER_EXTRA = "pip install 'grpodeck[worker]'"


def missing_training_stack() -> list[str]:
    """The training stack's modules this environment lacks (found without importing them)."""
    from importlib.util import find_spec

    return [name for name in TRAINING_STACK if find_spec(name) is None]


def no_worker_line(command: str, missing: list[str]) -> str:
    """One line: why ``command`` has no worker here and the install that adds one."""
    return (f"grpodeck {command}: no worker here: {', '.join(missing)} not installed "
            f"(the worker extra: {WORKER_EXTRA})")


def worker_command(concurrency: int | None = None, name: str | None = None) -> list[str]:
    """Without ``concurrency`` the worker decides: one pool process per device slot
    (GRPODECK_DEVICE_SLOTS / GRPODECK_GPUS_PER_RUN), else one. Named by ``node_name``: with
    the pid of the process that builds the command (``grpodeck worker`` execs Celery in that
    same process; ``up`` runs one worker, restarted under the same name once the old one died)."""
    chosen = [] if concurrency is None else [f"--concurrency={concurrency}"]
    return [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
            "--pool=prefork", *chosen, "-n", node_name(name), "-Q", get_settings().queue,
            "--loglevel=INFO"]


@cli.command()
def worker(concurrency: Annotated[int | None, typer.Option(
        help="runs at once; default: one per device slot (GRPODECK_DEVICE_SLOTS or "
             "GRPODECK_GPUS_PER_RUN), else 1")] = None,
           name: Annotated[str | None, typer.Option(
               envvar="GRPODECK_WORKER_NODE",
               help="Celery node name, NAME@<host> (e.g. gpu0); default grpodeck-<pid>: "
                    "unique among the workers of one host")] = None) -> None:
    """Run a Celery worker that trains queued runs (one run per process). Celery replaces this
    process (exec) rather than running under it: in a container it is then PID 1 and gets
    `docker stop`'s SIGTERM (a warm shutdown), where a Python parent would ignore it (PID 1 has
    no default handlers) until SIGKILL, or die alone and leave Celery running."""
    if missing := missing_training_stack():  # else Celery starts, then every run fails
        typer.echo(no_worker_line("worker", missing), err=True)
        raise typer.Exit(1)
    command = worker_command(concurrency, name)
    os.execv(command[0], command)


def scheduler_command() -> list[str]:
    return [sys.executable, "-m", "app.scheduler"]


@cli.command()
def scheduler() -> None:
    """Run the background process: alert delivery (the outbox sender) and the lost-run check.
    Run exactly one per deployment (a second one is harmless: jobs are claimed atomically)."""
    from app import scheduler as loop

    loop.main()


def serve_command(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "app.cli", "serve", "--host", host, "--port", str(port),
            "--no-migrate"]


def _child_environment(host: str, port: int, with_worker: bool = True) -> None:
    """What the children inherit: the worker reaches this web app on the port given here (its
    heartbeat and the task messages' report URL), the web app expects the background
    processes ``up`` starts, so one that never comes up is reported too (``app.processes``), and
    the scheduler settles live runs' metrics, so the one web process keeps its CPU for requests."""
    settings = get_settings()  # the environment and .env: an explicit choice is kept
    if settings.report_url is None:
        local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        os.environ["GRPODECK_REPORT_URL"] = f"http://{local}:{port}"
    if not settings.expect_processes:
        os.environ["GRPODECK_EXPECT_PROCESSES"] = "scheduler,worker" if with_worker else "scheduler"
    if "settle_in" not in settings.model_fields_set:  # the scheduler settles, not the web app
        os.environ["GRPODECK_SETTLE_IN"] = "scheduler"


def _log_supervision() -> None:
    """Every start, death and stop of a child, with the time, on stderr (alembic's logging
    configuration, applied by migrate, keeps only warnings and has no timestamps)."""
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(name)s] %(message)s"))
    logger = logging.getLogger("grpodeck.up")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False


def _end_workers_runs(trees: dict[str, set[int]]) -> None:
    """After ``up`` stopped its children: its worker's runs end now, saying why, rather than
    stay ``running`` until the next start's lost-run check (issue 55)."""
    import socket

    from app.runs.interrupted import end_interrupted

    end_interrupted(socket.gethostname(), trees.get("worker", set()))


@cli.command()
def up(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Dashboard, one worker and the scheduler together, each restarted when it dies (with
    backoff, logged): the one-command local setup (``app.supervisor``). Without the worker
    extra (``pip install grpodeck`` alone): the dashboard and the scheduler, and one line that
    says how to add the worker."""
    from app.supervisor import Child, Supervisor

    migrate()  # configures logging from alembic.ini (root at WARNING)
    _log_supervision()
    refuse_unsafe_bind(host)
    missing = missing_training_stack()
    if missing:
        typer.echo(no_worker_line("up", missing) + "; starting the dashboard and the scheduler",
                   err=True)
    _child_environment(host, port, with_worker=not missing)
    worker = [] if missing else [Child("worker", worker_command())]
    Supervisor([Child("web", serve_command(host, port)), *worker,
                Child("scheduler", scheduler_command())], after_stop=_end_workers_runs).run()


@cli.command()
def launch(spec_file: Path, url: Annotated[str | None, typer.Option(help="dashboard URL")] = None
           ) -> None:
    """Launch a run from a JSON spec file through the dashboard's API (with the API key in
    GRPODECK_API_KEY when the dashboard requires login)."""
    import httpx

    base = (url or get_settings().public_url).rstrip("/")
    key = os.environ.get("GRPODECK_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{base}/api/runs", json=json.loads(spec_file.read_text()),
                          headers=headers, timeout=30)
    if response.status_code == 401:
        typer.echo(f"rejected (401): {response.json().get('detail')}; create an API key on "
                   f"{base}/account and set GRPODECK_API_KEY", err=True)
        raise typer.Exit(1)
    if response.status_code != 201:
        typer.echo(f"rejected ({response.status_code}): {response.text}", err=True)
        raise typer.Exit(1)
    body = response.json()
    typer.echo(f"run {body['id']} {body['status']}: {base}{body['url']}")


MapOption = Annotated[list[str] | None, typer.Option(
    "--map", help="LOG_KEY=NAME: read a log key as a known metric (e.g. Reward=reward, "
                  "KL_ref=kl), or as the step (grpo_step=step); repeatable")]
EXIT_UNKNOWN = 3  # `diagnose` read no reward metric: nothing to call healthy


def _mapping(items: list[str] | None) -> dict[str, str]:
    from app.importers.mapping import parse_map

    try:
        return parse_map(items or [])
    except ValueError as exc:
        typer.echo(f"error: --map {exc}", err=True)
        raise typer.Exit(2) from None


@cli.command()
def diagnose(path: Path, as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
             max_completion_length: Annotated[int | None, typer.Option(
                 help="the run's max_completion_length, if known")] = None,
             map_: MapOption = None) -> None:
    """Diagnose a training log (or a folder: TRL output, TensorBoard events, mlruns/, a W&B
    run) without any server. Exit status: 0 diagnosed, 2 unreadable, 3 unknown (no reward
    metric was read)."""
    from app.diagnostics import RunContext
    from app.diagnostics.coverage import UNKNOWN
    from app.diagnostics.report import format_text, to_json_dict
    from app.importers import LogFormatError
    from app.importers.read_report import read_lines, read_summary, suggested_map
    from app.imports.service import read_and_diagnose

    mapping = _mapping(map_)
    try:
        diagnosis, log = read_and_diagnose(
            path, RunContext(max_completion_length=max_completion_length), mapping)
    except (LogFormatError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    unknown = diagnosis.verdict == UNKNOWN
    hint = suggested_map({k for _, m in log.rows for k in m}) if unknown else None
    if as_json:
        body = {**to_json_dict(diagnosis), "read": read_summary(log), "suggested_map": hint}
        typer.echo(json.dumps(body, indent=2))
    else:
        lines = [*read_lines(log), format_text(diagnosis)]
        if hint:
            lines.append(f"Try: grpodeck diagnose {path} {hint}")
        typer.echo("\n".join(lines))
    if unknown:
        raise typer.Exit(EXIT_UNKNOWN)


@cli.command("import")
def import_cmd(path: Path, name: Annotated[str | None, typer.Option(help="run name")] = None,
               map_: MapOption = None,
               save_map: Annotated[bool, typer.Option(
                   "--save-map", help="remember --map for the next log of this file or folder "
                                      "name (read with it when imported without --map)")] = False,
               url: Annotated[str | None, typer.Option(
                   help="upload to the Deck at this address (POST /api/imports) instead of "
                        "writing the database")] = None,
               api_key: Annotated[str | None, typer.Option(
                   envvar="GRPODECK_API_KEY", help="API key for --url")] = None) -> None:
    """Store a training log as an imported run (charts and findings in the dashboard); a
    trackio project (``$TRACKIO_DIR/<project>.db``) becomes one run per trackio run. A TRL
    output folder's run is named after the folder and keeps its saved training arguments.
    With ``--url`` the log is uploaded over HTTP: no database access needed."""
    if url:
        _upload(url, api_key, path, name, map_, save_map)
        return
    from app.core.db import get_sessionmaker
    from app.importers import LogFormatError
    from app.imports.service import import_path

    mapping = _mapping(map_)
    migrate()
    with get_sessionmaker()() as db:
        try:
            runs = import_path(db, path, name, mapping=mapping, save_mapping=save_map)
        except (LogFormatError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        db.commit()
        for run in runs:
            typer.echo(f"imported run {run.id} ({run.verdict}): "
                       f"{get_settings().public_url}/runs/{run.id}")


def _upload(url: str, api_key: str | None, path: Path, name: str | None,
            map_: list[str] | None, save_map: bool = False) -> None:
    """``import --url``: what ``grpodeck-client import`` does; ``save_map`` goes with the
    upload (the Deck remembers the mapping for the caller, as a local ``--save-map`` does)."""
    from grpodeck.client.upload import UploadError, upload_log

    _mapping(map_)  # a bad --map is refused here, before anything is sent
    try:
        runs = upload_log(url, api_key, path, name, map_, save_map=save_map)
    except (UploadError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for run in runs:
        typer.echo(f"imported run {run['id']} ({run['verdict']}): {run['url']}")


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


@cli.command("export")
def export_cmd(run_id: Annotated[int, typer.Argument(metavar="RUN", help="the run's id")],
               format_: Annotated[ExportFormat, typer.Option(
                   "--format", help="jsonl: a JSON object per step; csv: a column per metric")
               ] = ExportFormat.jsonl,
               output: Annotated[Path | None, typer.Option(
                   "-o", "--output", help="the file to write; default: standard output")] = None,
               url: Annotated[str | None, typer.Option(
                   help="download from the Deck at this address (GET /api/runs/RUN/export) "
                        "instead of reading the database")] = None,
               api_key: Annotated[str | None, typer.Option(
                   envvar="GRPODECK_API_KEY", help="API key for --url")] = None) -> None:
    """Write a run's rows, one per step (NaN/inf as "nan"/"inf"), as JSON Lines or CSV: what
    `grpodeck diagnose` and `grpodeck import` read back, so `grpodeck diagnose FILE` gives the
    run's own findings. Without --url it reads the local database (as `grpodeck import`
    writes it). Exit status: 0 written, 1 refused by the Deck, 2 no such run."""
    with _sink(output) as out:
        if url:
            written = _download(url, api_key, run_id, format_.value, out)
        else:
            written = _export_local(run_id, format_.value, out)
    rows = written - (format_ is ExportFormat.csv)  # a CSV's first line is its header
    typer.echo(f"exported run {run_id}: {rows} rows ({format_.value}) to "
               f"{output or 'standard output'}", err=True)


@contextmanager
def _sink(output: Path | None) -> Iterator[TextIO]:
    """The file named, written only once the export succeeds, or standard output."""
    if output is None:
        yield sys.stdout
        return
    part = output.with_name(output.name + ".part")
    try:
        with part.open("w", encoding="utf-8", newline="") as out:
            yield out
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(output)


def _write_all(chunks: Iterable[str], out: TextIO) -> int:
    """Write the chunks; returns the lines written."""
    lines = 0
    for chunk in chunks:
        out.write(chunk)
        lines += chunk.count("\n")
    return lines


def _export_local(run_id: int, fmt: str, out: TextIO) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from app.core.db import get_sessionmaker
    from app.metrics import export
    from app.runs.service import get_run

    with get_sessionmaker()() as db:
        try:
            run = get_run(db, run_id)
            if run is None:
                typer.echo(f"error: run {run_id} not found in {get_settings().database_url}",
                           err=True)
                raise typer.Exit(2)
            return _write_all(export.lines(db, run, fmt), out)
        except SQLAlchemyError as exc:
            typer.echo(f"error: cannot read the database ({exc.__class__.__name__}); "
                       "`grpodeck migrate` creates it", err=True)
            raise typer.Exit(2) from None


def _download(url: str, api_key: str | None, run_id: int, fmt: str, out: TextIO) -> int:
    """``export --url``: the same file, streamed from the Deck's API."""
    import httpx

    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.stream("GET", f"{base}/api/runs/{run_id}/export", params={"format": fmt},
                      headers=headers, timeout=60) as response:
        if response.status_code != 200:
            response.read()
            _refused(base, run_id, response)
        return _write_all(response.iter_text(), out)


def _refused(base: str, run_id: int, response: httpx.Response) -> NoReturn:
    """Why the Deck refused, in one line, and the exit status: 2 no such run, else 1."""
    if response.status_code == 401:
        typer.echo(f"rejected (401): {response.json().get('detail')}; create an API key on "
                   f"{base}/account and set GRPODECK_API_KEY", err=True)
        raise typer.Exit(1)
    if response.status_code == 404:
        typer.echo(f"error: run {run_id} not found on {base}", err=True)
        raise typer.Exit(2)
    typer.echo(f"rejected ({response.status_code}): {response.text[:500]}", err=True)
    raise typer.Exit(1)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
