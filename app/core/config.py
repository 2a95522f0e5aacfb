"""Settings from the environment (prefix ``GRPODECK_``), with embedded defaults.

The defaults need no server at all: SQLite for data and kombu's SQLAlchemy transport on a
SQLite file as the Celery broker, so a fresh laptop runs the whole product. Production sets
``GRPODECK_DATABASE_URL=postgresql+psycopg://...`` and ``GRPODECK_BROKER_URL=redis://...``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parents[2]
VAR = ROOT / "var"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRPODECK_", env_file=".env", extra="ignore")

    database_url: str = f"sqlite:///{VAR / 'grpodeck.db'}"
    broker_url: str = f"sqla+sqlite:///{VAR / 'broker.db'}"
    queue: str = "grpodeck"
    public_url: str = Field(
        "http://127.0.0.1:8000",
        description="where workers reach the web app to report metrics (no DB credentials needed)",
    )
    runs_dir: Path = VAR / "runs"
    cancel_grace_seconds: float = Field(
        30.0, description="after a stop request, how long the trainer may take before it is killed"
    )
    control_poll_seconds: float = 1.0
    chart_max_points: int = 2000
    live_refresh_seconds: float = 2.0
    rollout_max_steps: int = Field(
        200, description="captured rollout steps kept per run; older ones are thinned out")
    lost_check_seconds: float = Field(30.0, description="how often live runs are checked for silence")
    alert_urls: str = Field(
        "", description="deployment-wide alert destinations: Apprise URLs (json://, mailto://, "
        "slack://, ...) or webhook+http(s):// for the plain JSON payload; space separated")
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


@lru_cache
def get_settings() -> Settings:
    return Settings()
