"""Runs on many devices (issue 26): the spec's device fields are checked against what the
workers reported, with a 422 at the field that cannot be satisfied (API, sweeps and form).

The reports are kept as a broadcast keeps them (``remember``): there is no GPU here. A real CPU
worker's own report is in ``test_worker_capabilities.test_a_real_worker_on_redis_reports_no_gpu``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import get_settings
from app.launch import capabilities
from tests.app.conftest import one
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec

GIB = 1 << 30


def gpu_worker(count: int, deepspeed: bool = False) -> dict[str, Any]:
    return {"cuda": True, "vllm": False, "device": f"cuda: NVIDIA H200 (x{count})",
            "devices": [{"index": i, "name": "NVIDIA H200", "memory_bytes": 141 * GIB}
                        for i in range(count)], "deepspeed": deepspeed, "cpu_count": 16}


CPU_WORKER = {"cuda": False, "vllm": False, "device": "cpu: 2 threads", "devices": [],
              "deepspeed": False, "cpu_count": 2}


@pytest.fixture
def reported(client: TestClient) -> Iterator[Any]:
    """Keep these workers' replies as this deployment's fresh report."""

    def keep(**workers: dict[str, Any]) -> None:
        capabilities.remember(get_settings().broker_url,
                              [{f"{name}@node": w} for name, w in workers.items()])

    yield keep
    capabilities.forget()


def refused_at(reply: Any) -> dict[str, str]:
    """A 422's errors by the body field they name."""
    assert reply.status_code == 422, reply.text
    return {str(e["loc"][-1]): e["msg"] for e in reply.json()["detail"]}


def test_a_single_process_spec_asks_nothing_of_the_workers(client: TestClient,
                                                           reported: Any) -> None:
    reported(cpu=CPU_WORKER)
    assert client.post("/api/runs", json=tiny_spec()).status_code == 201
    assert client.post("/api/runs", json=tiny_spec(mixed_precision="no")).status_code == 201


def test_num_processes_beyond_every_workers_devices_is_refused_at_the_field(
        client: TestClient, reported: Any) -> None:
    reported(cpu=CPU_WORKER, gpu=gpu_worker(2))
    errors = refused_at(client.post("/api/runs", json=tiny_spec(num_processes=4)))
    assert set(errors) == {"num_processes"}
    assert "num_processes=4 is more devices than any worker reported" in errors["num_processes"]
    assert "2 GPU(s)" in errors["num_processes"] and "2 CPU cores" in errors["num_processes"]
    assert client.get("/api/runs").json() == []
    assert client.post("/api/runs", json=tiny_spec(num_processes=2)).status_code == 201


def test_cpu_workers_take_ddp_only_and_no_fp16(client: TestClient, reported: Any) -> None:
    reported(cpu=CPU_WORKER)
    assert client.post("/api/runs", json=tiny_spec(num_processes=2)).status_code == 201
    errors = refused_at(client.post("/api/runs", json=tiny_spec(num_processes=2,
                                                                distributed="fsdp")))
    assert set(errors) == {"distributed"} and "a CPU worker (ddp over gloo only)" in \
        errors["distributed"]
    errors = refused_at(client.post("/api/runs", json=tiny_spec(mixed_precision="fp16")))
    assert set(errors) == {"mixed_precision"} and "no fp16" in errors["mixed_precision"]


def test_deepspeed_needs_a_gpu_worker_with_the_package(client: TestClient,
                                                        reported: Any) -> None:
    reported(gpu=gpu_worker(2))
    spec = tiny_spec(num_processes=2, distributed="deepspeed_zero3")
    errors = refused_at(client.post("/api/runs", json=spec))
    assert set(errors) == {"distributed"} and "without the deepspeed package" in \
        errors["distributed"]
    assert client.post("/api/runs", json=tiny_spec(num_processes=2,
                                                   distributed="fsdp")).status_code == 201
    reported(gpu=gpu_worker(2, deepspeed=True))
    assert client.post("/api/runs", json=spec).status_code == 201


def test_every_field_must_suit_one_and_the_same_worker(client: TestClient,
                                                       reported: Any) -> None:
    """Four processes fit the CPU worker's cores (16 here), fsdp the GPU worker: not together."""
    reported(cpu={**CPU_WORKER, "cpu_count": 16}, gpu=gpu_worker(2))
    errors = refused_at(client.post("/api/runs", json=tiny_spec(num_processes=4,
                                                                distributed="fsdp")))
    assert set(errors) == {"num_processes", "distributed"}
    both = tiny_spec(num_processes=2, mixed_precision="fp16")  # the GPU worker takes it
    assert client.post("/api/runs", json=both).status_code == 201


def test_no_report_leaves_ddp_to_the_worker_and_refuses_sharding(client: TestClient) -> None:
    """The embedded broker carries no reports: the worker checks ddp itself when it starts."""
    capabilities.forget()
    assert client.post("/api/runs", json=tiny_spec(num_processes=2)).status_code == 201
    errors = refused_at(client.post("/api/runs", json=tiny_spec(num_processes=2,
                                                                distributed="deepspeed_zero2")))
    assert "needs a GPU worker, and no worker has reported its devices" in errors["distributed"]
    assert "embedded SQLite broker" in errors["distributed"]


def test_spec_rules_that_need_no_worker(client: TestClient) -> None:
    for bad, field in (({"num_processes": 0}, "num_processes"),
                       ({"num_processes": 65}, "num_processes"),
                       ({"distributed": "horovod"}, "distributed"),
                       ({"mixed_precision": "fp8"}, "mixed_precision"),
                       ({"vllm_mode": "remote"}, "vllm_mode"),
                       ({"vllm_gpu_memory_utilization": 0}, "vllm_gpu_memory_utilization"),
                       ({"vllm_gpu_memory_utilization": 1.0}, "vllm_gpu_memory_utilization")):
        reply = client.post("/api/runs", json=tiny_spec(**bad))
        assert reply.status_code == 422, bad
        assert any(e["loc"][-1] == field for e in reply.json()["detail"]), (bad, reply.text)
    reply = client.post("/api/runs", json=tiny_spec(distributed="fsdp"))
    assert reply.status_code == 422 and "fsdp shards the model across processes" in reply.text


def test_sweeps_are_checked_the_same_way(client: TestClient, reported: Any) -> None:
    reported(cpu=CPU_WORKER)
    reply = client.post("/api/sweeps", json={"spec": tiny_spec(num_processes=3),
                                             "num_generations": [2, 4]})
    assert refused_at(reply).keys() == {"num_processes"}
    assert reply.json()["detail"][0]["loc"] == ["body", "spec", "num_processes"]


def test_form_shows_the_devices_fieldset_and_refuses_at_the_field(client: TestClient,
                                                                  reported: Any) -> None:
    reported(cpu=CPU_WORKER)
    page = client.get("/runs/new").text
    assert one(page, "#f-num_processes")["value"] == "1"
    assert one(page, "#f-distributed option[selected]").get_text() == "ddp"
    assert one(page, "#f-mixed_precision option[selected]").get_text() == "auto"
    data = {**submitted(one(page, "#run-form")), "num_processes": "3"}
    refused = client.post("/runs/new", data=data)
    assert refused.status_code == 422
    assert "2 CPU cores" in one(refused.text, "#e-num_processes").get_text()
    assert one(refused.text, "#f-num_processes")["aria-invalid"] == "true"
    assert one(refused.text, "#advanced").has_attr("open")
    launched = client.post("/runs/new", data={**data, "num_processes": "2"},
                           follow_redirects=False)
    assert launched.status_code == 303, launched.text
    spec = client.get(launched.headers["location"].replace("/runs/", "/api/runs/")).json()["spec"]
    assert (spec["num_processes"], spec["distributed"], spec["mixed_precision"]) == (2, "ddp",
                                                                                     "auto")


def test_a_worker_of_an_older_version_is_not_judged_by_devices_it_did_not_report(
        client: TestClient, reported: Any) -> None:
    """Other deployments' workers may share the broker: one that reports no device fields is
    neither counted as one core nor as a GPU worker (the run's own worker checks at start)."""
    reported(old={"cuda": False, "vllm": False, "device": "cpu: 2 threads"})
    assert client.post("/api/runs", json=tiny_spec(num_processes=8)).status_code == 201
    errors = refused_at(client.post("/api/runs", json=tiny_spec(num_processes=2,
                                                                distributed="fsdp")))
    assert "no worker has reported its devices" in errors["distributed"]
    reported(old={"cuda": False, "vllm": False, "device": "cpu"}, new=CPU_WORKER)
    assert refused_at(client.post("/api/runs", json=tiny_spec(num_processes=8))) \
        .keys() == {"num_processes"}


def test_parse_keeps_the_well_formed_device_entries() -> None:
    found = capabilities.parse([{"w@n": {**gpu_worker(1), "devices": [
        {"index": 0, "name": "H200", "memory_bytes": 5}, {"index": "x"}, "junk"]}}])
    assert found["w@n"]["devices"] == [{"index": 0, "name": "H200", "memory_bytes": 5}]
    assert found["w@n"]["cpu_count"] == 16 and found["w@n"]["deepspeed"] is False
