"""Imports every table module so Alembic and the tests see the whole schema."""

from app.alerts.models import Alert, AlertConfig, AlertMute, Delivery, DeliveryAttempt  # noqa: F401
from app.artifacts.models import Artifact, ArtifactReservation  # noqa: F401
from app.auth.models import ApiKey, User, UserSession  # noqa: F401
from app.dryruns.models import DryRun  # noqa: F401
from app.health.models import DiagnosticsRecord, FindingRecord  # noqa: F401
from app.imports.saved_mappings import SavedMapping  # noqa: F401
from app.logs.models import RunLogChunk  # noqa: F401
from app.metrics.models import MetricChunk, MetricKey, MetricRollup, SystemSample  # noqa: F401
from app.processes.models import HeartbeatRecord  # noqa: F401
from app.rollouts.models import RolloutGroup  # noqa: F401
from app.runs.models import Run, RunTag  # noqa: F401
