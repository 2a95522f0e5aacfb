"""System metrics on the run page (issue 25): ``system/*`` rows go through ingest as any metric,
and the page draws them as their own chart group after the training charts, with the group's
title on its first chart, their words in the chart summaries, NaN as a gap, and the oom_risk
finding (with its key number) shaded on the GPU memory chart."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import get_sessionmaker
from app.metrics.models import SystemSample
from app.metrics.names import normalize_row
from tests.app.conftest import html, one, running_run

GB = 1e9


def system_rows(steps: range, reserved_share: float) -> list[dict]:  # type: ignore[type-arg]
    return [{"step": s, "metrics": {
        "reward": 0.1 * s, "loss": 0.5,
        "system/cpu_percent": 150.0 + s, "system/rss_bytes": 3 * GB,
        "system/gpu0/mem_reserved_bytes": reserved_share * 80 * GB,
        "system/gpu0/mem_allocated_bytes": 40 * GB, "system/gpu0/mem_total_bytes": 80 * GB,
        "system/gpu0/util_percent": 90.0, "system/tokens_per_s": 1_000.0 + s}} for s in steps]


def test_ingest_keeps_system_names_and_values_as_sent() -> None:
    row = {"system/gpu0/mem_reserved_bytes": 7.5e10, "system/cpu_percent": "nan",
           "system/tokens_per_s": 12}
    out = normalize_row(row)
    assert set(out) == set(row) and out["system/gpu0/mem_reserved_bytes"] == 7.5e10
    assert out["system/tokens_per_s"] == 12.0 and out["system/cpu_percent"] != out[
        "system/cpu_percent"]  # NaN kept: a gap on the chart


def test_the_run_page_draws_system_metrics_as_their_own_group(client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = system_rows(range(1, 9), 0.97)
    rows.append({"step": 9, "metrics": {"system/cpu_percent": "nan"}})
    for row in rows:  # one batch per step, as a live run reports: the finding confirms
        sent = client.post(f"/api/runs/{run_id}/metrics", json={"rows": [row]}, headers=headers)
        assert sent.status_code == 200, sent.text
    page = client.get(f"/runs/{run_id}").text
    boxes = html(page).select("#charts-panel .chart-box")
    keys = [b["data-key"] for b in boxes]
    groups = [b["data-group"] for b in boxes]
    system = ["system_cpu", "system_rss", "system_gpu_memory", "system_gpu_util",
              "system_throughput"]
    assert keys[-5:] == system and "reward" in keys
    assert groups == ["training"] * (len(keys) - 5) + ["system"] * 5  # together, after training
    title = one(page, "#chart-group-system")
    assert title.get_text().startswith("System") and title.find_parent(class_="chart-box") is None
    assert title.find_next_sibling(class_="chart-box")["data-key"] == "system_cpu"  # above it
    memory = json.loads(one(page, "#chart-system_gpu_memory")["data-figure"])
    assert [t["name"] for t in memory["data"] if t.get("meta") is None] == [
        "system/gpu0/mem_reserved_bytes", "system/gpu0/mem_allocated_bytes",
        "system/gpu0/mem_total_bytes"]
    assert [s["x0"] for s in memory["layout"]["shapes"]] == [1]  # the oom_risk range, shaded
    cpu = json.loads(one(page, "#chart-system_cpu")["data-figure"])
    assert cpu["data"][0]["y"][-1] is None  # NaN is a gap
    assert "1 non-finite value: NaN at step 9" in one(page, "#nonfinite-system_cpu").get_text()
    findings = client.get(f"/api/runs/{run_id}/findings").json()
    risk = [f for f in findings["findings"] if f["category"] == "oom_risk"]
    assert len(risk) == 1 and risk[0]["metric"] == "system/gpu0/mem_reserved_bytes"
    assert risk[0]["severity"] == "warning"
    assert "gpu0 memory 97% reserved" in page
    summaries = client.get(f"/runs/{run_id}/_summaries").text
    assert "Throughput" in summaries and "last 1008 at step 8" in summaries


def test_a_run_without_system_metrics_has_no_system_group(client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": 0.1 * s}} for s in range(1, 5)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    page = client.get(f"/runs/{run_id}").text
    assert not html(page).select("#chart-group-system, .chart-box[data-group=system]")
    assert html(page).select(".chart-box[data-key=reward]")


def test_system_charts_read_by_the_clock_when_samples_are_stamped(client: TestClient) -> None:
    """Samples stamped with ``system/time`` (the client's sampler does) put the system charts on
    a wall-clock axis: a point's x is its sample's time, a step between two stamps is placed
    between them, the oom_risk range is shaded at its times, and the tooltip keeps the step.
    The training charts stay on steps. A row without a stamp is no sample (issue 56: the
    samples are drawn, each at its time); a metric without samples is placed by its steps
    (``test_a_stamp_that_is_no_clock_reading_is_left_out``)."""
    run_id, headers = running_run(client)
    t0 = 1_800_000_000.0
    rows = system_rows(range(1, 9), 0.97)
    for row in rows:
        if row["step"] != 4:  # step 4 has no stamp: placed halfway between steps 3 and 5
            row["metrics"]["system/time"] = t0 + 60 * row["step"] + (30 if row["step"] > 4 else 0)
    for row in rows:
        assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": [row]},
                           headers=headers).status_code == 200
    page = client.get(f"/runs/{run_id}").text
    memory = json.loads(one(page, "#chart-system_gpu_memory")["data-figure"])
    line = memory["data"][0]
    ms = [1000 * (t0 + 60 * s + (30 if s > 4 else 0)) for s in range(1, 9)]
    ms[3] = (ms[2] + ms[4]) / 2
    assert line["x"] == ms[:3] + ms[4:]  # the samples, at their times
    assert line["text"][0] == "step 1" and line["hovertemplate"].endswith("%{text}")
    assert memory["layout"]["xaxis"]["type"] == "date" and memory["layout"]["meta"] == {
        "byte_ticks": True, "time_axis": True, "samples": [
            "system/gpu0/mem_reserved_bytes", "system/gpu0/mem_allocated_bytes",
            "system/gpu0/mem_total_bytes"]}
    assert memory["layout"]["shapes"][0]["x0"] == ms[0]  # the finding's range, in time
    reward = json.loads(one(page, "#chart-reward")["data-figure"])
    assert reward["data"][0]["x"][:3] == [1, 2, 3] and "type" not in reward["layout"]["xaxis"]
    assert not html(page).select(".chart-box[data-key=system_time]")


def test_a_stamp_that_is_no_clock_reading_is_left_out(client: TestClient) -> None:
    """NaN, 1e300 or milliseconds sent as seconds cannot stretch the axis over centuries: such
    a stamp is ignored (its row is no sample, and a step of a metric without samples is placed
    between its plausible neighbours); a run with none left keeps the step axis."""
    run_id, headers = running_run(client)
    t0 = 1_800_000_000.0
    stamps = {1: t0, 2: "nan", 3: 1e300, 4: t0 * 1000, 5: t0 + 40}
    rows = [{"step": s, "metrics": {"system/cpu_percent": 100.0, "system/time": t}}
            for s, t in stamps.items()]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    page = client.get(f"/runs/{run_id}").text
    cpu = json.loads(one(page, "#chart-system_cpu")["data-figure"])
    assert cpu["data"][0]["x"] == [1000 * t0, 1000 * (t0 + 40)]  # the two plausible samples
    rows = [{"step": s, "metrics": {"system/tokens_per_s": 5.0}} for s in stamps]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    page = client.get(f"/runs/{run_id}").text
    rate = json.loads(one(page, "#chart-system_throughput")["data-figure"])
    assert rate["data"][0]["x"] == [1000 * (t0 + 10 * k) for k in range(5)]

    other, headers = running_run(client)
    rows = [{"step": 1, "metrics": {"system/cpu_percent": 1.0, "system/time": -5.0}}]
    assert client.post(f"/api/runs/{other}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    cpu = json.loads(one(client.get(f"/runs/{other}").text, "#chart-system_cpu")["data-figure"])
    assert cpu["data"][0]["x"] == [1] and "time_axis" not in cpu["layout"].get("meta", {})


def test_samples_of_one_step_are_kept_each_once_and_served_by_time(client: TestClient) -> None:
    """Issue 56 (7a): samples that carry one step (an evaluation) are each kept at their time,
    a batch sent again keeps them once, ``system-samples?after_ms=`` serves the newer ones (a
    live chart's poll), and deleting the run deletes them."""
    run_id, headers = running_run(client)
    t0 = 1_800_000_000.0
    rows = [{"step": 3, "metrics": {"system/cpu_percent": 10.0 + i, "system/time": t0 + i}}
            for i in range(4)]
    for _ in range(2):  # a retried batch
        assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                           headers=headers).status_code == 200
    got = client.get(f"/api/runs/{run_id}/system-samples").json()
    ms = [1000 * (t0 + i) for i in range(4)]
    assert got == {"last_ms": ms[-1], "series": {"system/cpu_percent": {
        "x": ms, "values": [10.0, 11.0, 12.0, 13.0], "steps": [3] * 4, "text": ["step 3"] * 4}}}
    newer = client.get(f"/api/runs/{run_id}/system-samples", params={"after_ms": int(ms[1])})
    assert newer.json()["series"]["system/cpu_percent"]["x"] == ms[2:]
    assert client.get(f"/api/runs/{run_id}/metrics").json()["system/cpu_percent"] == {
        "steps": [3], "values": [13.0]}  # a step keeps its last value, as before
    assert client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=headers).status_code == 200
    assert client.delete(f"/api/runs/{run_id}").status_code == 204
    with get_sessionmaker()() as db:
        assert db.scalar(select(func.count()).select_from(SystemSample)) == 0
