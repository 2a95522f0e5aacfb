"""use_vllm is offered only where a worker reported a CUDA GPU and vllm (app.launch.capabilities):
elsewhere the form says why in one line and the API refuses it with a 422 saying why.

The workers' reports travel by Celery remote control, which needs a broker with fanout: on the
embedded SQLite broker (these tests' default) none can arrive. A real CPU worker on Redis
answers in ``test_a_real_worker_on_redis_reports_no_gpu``; a GPU worker's answer (there is no
GPU here) is kept as the broadcast would keep it (``remember``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from app.core.config import get_settings
from app.launch import capabilities
from tests.app.conftest import one
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec
from tests.stack import Stack

GPU_WORKER = {"gpu-1@node": {"cuda": True, "vllm": True, "device": "cuda: NVIDIA H200 (x1)"}}
GPU_NO_VLLM = {"gpu-2@node": {"cuda": True, "vllm": False, "device": "cuda: NVIDIA H200 (x1)"}}
OLD_WORKER = {"old@node": {"error": "KeyError('grpodeck_capabilities')"}}


def test_parse_keeps_well_formed_answers_only() -> None:
    found = capabilities.parse([GPU_WORKER, OLD_WORKER, {"odd@node": {"cuda": "yes", "vllm": True}}])
    assert found == {"gpu-1@node": GPU_WORKER["gpu-1@node"]}


def test_embedded_broker_hides_use_vllm_and_says_why(client: TestClient) -> None:
    page = client.get("/runs/new").text
    assert not html_has(page, "#f-use_vllm")
    note = one(page, "#no-vllm").get_text()
    assert "no worker with a GPU has reported" in note and "embedded SQLite broker" in note


def test_api_refuses_use_vllm_when_no_gpu_worker_reported(client: TestClient) -> None:
    reply = client.post("/api/runs", json=tiny_spec(use_vllm=True))
    assert reply.status_code == 422
    [error] = reply.json()["detail"]
    assert error["loc"] == ["body", "use_vllm"]
    assert "use_vllm needs a worker with a CUDA GPU and vllm, and no worker with a GPU has " \
           "reported" in error["msg"]
    assert client.get("/api/runs").json() == []
    reply = client.post("/api/sweeps", json={"spec": tiny_spec(use_vllm=True),
                                             "num_generations": [2, 4]})
    assert reply.status_code == 422 and "use_vllm needs" in reply.text


def test_form_refuses_use_vllm_at_the_field(client: TestClient) -> None:
    """A cloned vLLM run (or a hand-made post) ticks it: the box stays, to be unticked."""
    data = {**submitted(one(client.get("/runs/new").text, "#run-form")), "use_vllm": "on"}
    page = client.post("/runs/new", data=data)
    assert page.status_code == 422
    assert "no worker with a GPU has reported" in one(page.text, "#e-use_vllm").get_text()
    assert one(page.text, "#f-use_vllm").has_attr("checked")
    assert one(page.text, "#advanced").has_attr("open")


def test_a_reported_gpu_offers_use_vllm(client: TestClient) -> None:
    capabilities.remember(get_settings().broker_url, [GPU_WORKER, OLD_WORKER])
    page = client.get("/runs/new").text
    box = one(page, "#f-use_vllm")
    assert not box.has_attr("checked") and not html_has(page, "#no-vllm")
    data = {**submitted(one(page, "#run-form")), "use_vllm": "on"}
    launched = client.post("/runs/new", data=data, follow_redirects=False)
    assert launched.status_code == 303, launched.text
    spec = client.get(launched.headers["location"].replace("/runs/", "/api/runs/")).json()["spec"]
    assert spec["use_vllm"] is True
    assert client.post("/api/runs", json=tiny_spec(use_vllm=True)).status_code == 201


def test_a_gpu_without_vllm_is_not_enough(client: TestClient) -> None:
    capabilities.remember(get_settings().broker_url, [GPU_NO_VLLM])
    page = client.get("/runs/new").text
    assert not html_has(page, "#f-use_vllm")
    assert "no vllm package" in one(page, "#no-vllm").get_text()
    reply = client.post("/api/runs", json=tiny_spec(use_vllm=True))
    assert reply.status_code == 422 and "no vllm package" in reply.text


@pytest.fixture
def redis_worker(tmp_path: Path) -> Iterator[Stack]:
    """A real Celery worker of this code on Redis (db 9, its own queue, as tests/stack.py)."""
    worker = Stack(f"sqlite:///{tmp_path / 'unused.db'}", "redis://127.0.0.1:6379/9", tmp_path)
    worker.start_worker()
    try:
        yield worker
    finally:
        worker.stop()


def test_a_real_worker_on_redis_reports_no_gpu(client: TestClient, redis_worker: Stack,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_BROKER_URL", redis_worker.broker_url)
    monkeypatch.setenv("GRPODECK_QUEUE", redis_worker.queue)
    config_module.get_settings.cache_clear()
    capabilities.forget()
    deadline = time.monotonic() + 90
    while not (reports := capabilities.worker_reports()).workers:
        assert time.monotonic() < deadline, redis_worker.log("worker")
        assert redis_worker.named["worker"].poll() is None, redis_worker.log("worker")
        capabilities.forget()
        time.sleep(1)
    # every worker on this broker answered for itself (other sessions' workers may share db 9)
    assert reports.broadcast and not reports.vllm_ready
    assert all(not w["cuda"] and w["device"].startswith("cpu: ") for w in reports.workers.values())
    assert all(w["devices"] == [] and w["cpu_count"] >= 1 and isinstance(w["deepspeed"], bool)
               for w in reports.workers.values())
    page = client.get("/runs/new").text
    assert not html_has(page, "#f-use_vllm")
    assert one(page, "#no-vllm").get_text().strip() == "use_vllm: no worker with a GPU has reported."
    reply = client.post("/api/runs", json=tiny_spec(use_vllm=True))
    assert reply.status_code == 422 and "no worker with a GPU has reported" in reply.text
    capabilities.forget()


def html_has(page: str, selector: str) -> bool:
    from tests.app.conftest import html

    return bool(html(page).select(selector))
