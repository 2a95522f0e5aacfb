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


def test_database_password_comes_from_an_env_file_and_containers_run_unprivileged() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    db, web = compose["services"]["db"]["environment"], compose["services"]["web"]["environment"]
    assert "POSTGRES_HOST_AUTH_METHOD" not in db  # no `trust`
    assert db["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")  # required, from .env
    assert ":${POSTGRES_PASSWORD:?" in web["GRPODECK_DATABASE_URL"]
    example = (ROOT / ".env.example").read_text()
    assert "POSTGRES_PASSWORD=" in example
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    users = [line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines()
             if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}  # web and worker share the image
    assert all("user" not in s or s["user"] not in {"root", "0"}
               for s in compose["services"].values() if s.get("build"))


def test_compose_runs_the_scheduler_as_its_own_service() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    scheduler = services["scheduler"]
    assert scheduler["command"] == ["grpodeck", "scheduler"]
    assert scheduler["environment"]["GRPODECK_DATABASE_URL"].startswith("postgresql+psycopg")
    assert "GRPODECK_ALERT_URLS" in scheduler["environment"]  # both write outbox jobs
    assert "GRPODECK_ALERT_URLS" in services["web"]["environment"]
    assert "scheduler" not in " ".join(services["web"]["command"])
