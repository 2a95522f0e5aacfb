"""Settings from the environment (prefix ``GRPODECK_``), with embedded defaults.

The defaults need no server at all: SQLite for data and kombu's SQLAlchemy transport on a
SQLite file as the Celery broker, so a fresh laptop runs the whole product. Production sets
``GRPODECK_DATABASE_URL=postgresql+psycopg://...`` and ``GRPODECK_BROKER_URL=redis://...``.
The worker reads its own settings (``worker.settings``: runs, models and datasets directories,
timeouts of a training run) from the same environment.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grpodeck.contract.tasks import DEFAULT_BROKER_URL, DEFAULT_QUEUE, ROOT, VAR

__all__ = ["ROOT", "VAR", "Settings", "get_settings"]  # ROOT and VAR: re-exported for the app


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRPODECK_", env_file=".env", extra="ignore")

    database_url: str = f"sqlite:///{VAR / 'grpodeck.db'}"
    broker_url: str = DEFAULT_BROKER_URL
    database_pool_size: int = Field(
        20, description="PostgreSQL connections kept open per web process; with max_overflow it "
        "should cover the request thread pool (40), or requests queue for a connection")
    database_max_overflow: int = 20
    database_lock_timeout_seconds: float = Field(
        10.0, gt=0, description="how long a request waits for a lock another transaction or "
        "process holds (SQLite's busy timeout, PostgreSQL's lock_timeout) before it is answered "
        "503 + Retry-After")
    queue: str = DEFAULT_QUEUE
    public_url: str = Field(
        "http://127.0.0.1:8000",
        description="the address people open: the base of links in alert messages and CLI output, "
        "and https here marks session cookies Secure",
    )
    report_url: str | None = Field(
        None, description="where workers reach the web app (claim, metrics, end of run; no DB "
        "credentials needed), sent in each task message; defaults to public_url. In compose it is "
        "the internal http://web:8000 while public_url is what browsers open")
    datasets_dir: Path = Field(
        VAR / "datasets", description="the only place local .json/.jsonl datasets are read from; "
        "uploads are stored here")
    runs_dir: Path = Field(
        VAR / "runs", description="the workers' run folders, when they share this host's disk (the "
        "embedded default); deleting a run removes its folder there, if any")
    artifacts_dir: Path = Field(
        VAR / "artifacts", description="where run artifacts (checkpoints, final models, trainer "
        "states) uploaded by workers and scripts are stored, one folder per run")
    artifact_max_bytes: int = Field(
        8 * 1024**3, ge=0, description="largest artifact upload accepted (a checkpoint folder "
        "travels as one tar); larger bodies get 413, counted as they stream in")
    artifact_run_quota_bytes: int = Field(
        64 * 1024**3, ge=0, description="artifact bytes one run may store in all (413 past it); "
        "0: no quota")
    artifact_user_quota_bytes: int = Field(
        256 * 1024**3, ge=0, description="artifact bytes all runs of one user may store (413 "
        "past it); 0: no quota")
    artifact_keep: int = Field(
        5, ge=0, description="checkpoints kept per run: registering one more deletes the oldest "
        "(by step); 0 keeps all. Final models, trainer states and files are always kept")
    dataset_upload_max_bytes: int = Field(20 * 1024 * 1024, description="largest dataset upload accepted")
    chart_max_points: int = 2000
    live_refresh_seconds: float = 2.0
    rollout_max_steps: int = Field(
        200, description="captured rollout steps kept per run; older ones are thinned out")
    diagnostics_persist_seconds: float = Field(
        10.0, description="how often a live run's diagnostics state is written back; between "
        "writes it lives in the web process and is rebuilt from stored points if lost")
    diagnostics_min_interval_seconds: float = Field(
        1.0, ge=0, description="a live run's detectors run at most this often; batches between "
        "two evaluations only feed the diagnostics state (0: evaluate every batch)")
    settle_seconds: float = Field(
        0.5, ge=0, description="live runs' waiting metric steps are spread into their charts "
        "at least this often (in a web process also at once after a batch it received; 0: no "
        "background settler; readers still see the waiting steps)")
    settle_in: Literal["web", "scheduler"] = Field(
        "web", description="which process settles: a thread of each web process (web), or the "
        "scheduler (scheduler: the web processes keep their CPU for requests; `grpodeck up` "
        "and the compose file choose it)")
    access_log_reports: bool = Field(
        False, description="also log each routine report a run sends that succeeded (a metric "
        "batch, a log chunk, a control poll, a worker heartbeat, an MLflow metric call): about "
        "one a second per run; people's requests and every error are always logged")
    lost_check_seconds: float = Field(30.0, description="how often live runs are checked for silence")
    max_body_bytes: int = Field(
        256 * 1024, ge=0, description="request body limit of the JSON API and the forms (a run "
        "spec is a few hundred bytes); larger bodies get 413 before they are read")
    ingest_max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=0, description="request body limit of the report API (metric "
        "batches and captured rollouts; a default capture is ~0.3 MB per step)")
    upload_max_body_bytes: int = Field(
        200 * 1024 * 1024, ge=0, description="request body limit of the log import form "
        "(a trainer_state.json plus its completions parquet files)")
    auth: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: login is skipped only for requests to a loopback address while "
        "no account exists (development mode); on: always log in; off: never log in (loopback "
        "only; serving on another address refuses to start)")
    session_days: float = Field(14.0, description="how long a browser login lasts")
    argon2_time_cost: int = Field(
        3, ge=1, description="Argon2id passes per password hash (pwdlib's recommended 3); stored "
        "hashes made with other costs are rehashed at their next sign-in")
    argon2_memory_kib: int = Field(
        65536, ge=8, description="Argon2id memory per password hash, KiB (recommended 65536); "
        "lower only where hashing speed matters more than resisting offline guessing (the "
        "test suite uses the minimum)")
    argon2_parallelism: int = Field(
        4, ge=1, description="Argon2id lanes per password hash (recommended 4)")
    login_limit: str = Field(
        "3/minute;5/15 minutes;20/day", description="the ladder of failed sign-ins allowed per "
        "account from one client address (4x that per address over all accounts), `limits` "
        "notation separated by ';': past a rung, tries from that address are refused with 429 "
        "until its window moves on; the same account from another address is not slowed")
    login_limit_storage: str = Field(
        "memory://", description="where failed sign-ins are counted (a `limits` storage URL): "
        "memory:// is per web process; redis://host:6379 shares the count between processes")
    trusted_proxies: str = Field(
        "", description="reverse proxies (addresses or networks, comma separated, e.g. "
        "'10.0.0.2,172.18.0.0/16') whose X-Forwarded-For and X-Forwarded-Proto are believed; "
        "empty: those headers are ignored from everyone, loopback included")
    trusted_origins: list[str] = Field(
        [], description="other origins (scheme://host:port) whose pages may post to this app, "
        "e.g. a reverse proxy's public address when it rewrites Host")
    lost_after_seconds: float = Field(
        120.0, description="a running run whose worker gave no sign of life (claim, heartbeat, "
        "report) for this long, or 3x its usual report interval if longer, is failed as lost")
    web_health_url: str | None = Field(
        None, description="where the scheduler checks that the web app answers (the lost-run "
        "check pauses while it does not); defaults to the workers' report URL")
    heartbeat_seconds: float = Field(
        10.0, description="how often the scheduler records its heartbeat (workers: the same "
        "variable, on their side)")
    heartbeat_stale_seconds: float = Field(
        60.0, description="a scheduler, or every worker, silent this long shows a banner on every "
        "page and fails /healthz?strict=1")
    expect_processes: str = Field(
        "", description="comma-separated kinds (scheduler, worker) this deployment runs: one never "
        "heard from within heartbeat_stale_seconds of the web app's start is reported too. "
        "Otherwise only a process that beat once and then fell silent is (`grpodeck up` sets both)")
    worker_secret: str | None = Field(
        None, description="shared secret workers send with their heartbeat (Bearer); unset, only "
        "heartbeats from this machine (loopback) are accepted")
    alert_urls: str = Field(
        "", description="deployment-wide alert destinations: Apprise URLs (json://, mailto://, "
        "slack://, ...) or webhook+http(s):// for the plain JSON payload; space separated")
    alert_allow_hosts: str = Field(
        "", description="hosts, addresses or networks (CIDR) alert deliveries may reach although "
        "they are loopback, private, link-local or metadata addresses (an internal webhook, a "
        "local SMTP relay); space or comma separated. Everything else must be public")
    alert_poll_seconds: float = Field(1.0, description="how often the sender looks for due jobs")
    alert_timeout_seconds: float = Field(
        10.0, description="per-destination connect/read timeout of one delivery attempt")
    alert_max_attempts: int = Field(5, description="attempts before a delivery is marked dead")
    alert_retry_seconds: float = Field(
        15.0, description="first retry delay; each later retry waits 3x longer (at most 1 h)")
    alert_reopen_seconds: float = Field(
        3600.0, description="a condition that comes back this soon after it resolved reopens "
        "the same alert")
    alert_digest_runs: int = Field(
        3, description="due messages for this many runs or more to one destination go as one "
        "digest")

    @model_validator(mode="after")
    def _argon2_memory_covers_its_lanes(self) -> Settings:
        """Argon2 needs 8 KiB per lane; refused here, not at the first sign-in."""
        if self.argon2_memory_kib < 8 * self.argon2_parallelism:
            raise ValueError(f"argon2_memory_kib must be at least 8 x argon2_parallelism "
                             f"({8 * self.argon2_parallelism})")
        return self

    @property
    def worker_report_url(self) -> str:
        """The base URL put in task messages: the two differ when workers sit on an internal
        network (compose) and people reach the app through a proxy or a public name."""
        return self.report_url or self.public_url


@lru_cache
def get_settings() -> Settings:
    return Settings()
