"""docker-compose.yml keeps the production shape (Docker itself can't run on CI machines)."""

from __future__ import annotations

import yaml

from app.core.config import ROOT


def test_compose_has_db_broker_web_and_scalable_gpu_workers() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"db", "redis", "web", "worker"} <= set(services)
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N works
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert isinstance(devices[0]["count"], int)
    assert "GRPODECK_DATABASE_URL" not in worker["environment"]  # workers report over HTTP
    assert worker["environment"]["GRPODECK_BROKER_URL"].startswith("redis://")
    assert services["web"]["environment"]["GRPODECK_DATABASE_URL"].startswith("postgresql+psycopg")


def test_compose_runs_the_scheduler_as_its_own_service() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    scheduler = services["scheduler"]
    assert scheduler["command"] == ["grpodeck", "scheduler"]
    assert scheduler["environment"]["GRPODECK_DATABASE_URL"].startswith("postgresql+psycopg")
    assert "GRPODECK_ALERT_URLS" in scheduler["environment"]  # both write outbox jobs
    assert "GRPODECK_ALERT_URLS" in services["web"]["environment"]
    assert "scheduler" not in " ".join(services["web"]["command"])
