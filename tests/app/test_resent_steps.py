"""Re-sent steps (issue 57): where a run's rows and its summaries could part ways. A worker
re-sends a step after a network hiccup, or a trainer logs a step again with another value; all
of it goes through the report API and is read back through the HTTP readers.

* The live diagnosis takes a re-sent step's new value in, the last step's included: its
  findings are what ``diagnose`` of the run's exported rows says (a re-sent step marks the
  live state stale, ``app.health.state_cache``; a state that skipped the step as "already
  seen" kept a NaN out of the findings).
* Every reader (``/metrics`` whole, after a step and downsampled, ``/chart`` whole and zoomed,
  the compare page, the export as JSON Lines and CSV) shows a re-sent step exactly once, with
  its new value, whether the step was settled or still waiting (the merge of settled and
  waiting rows, ``app.metrics.waiting.merge``: the waiting value wins, it is not added). A
  chart's summaries (a rollup level above 0) count the step once, and hold its new value once
  it is settled (a second or so later: ``waiting.merge_buckets``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.diagnostics import diagnose
from app.health import state_cache
from app.health.service import context_for
from app.runs.models import Run
from tests.app.conftest import html, running_run
from tests.settled import settle

Row = tuple[int, dict[str, float]]
N = 30  # steps a run reports before it re-sends one


def healthy(n: int = N) -> list[Row]:
    """A run that learns: reward rising with spread, steady entropy and KL, a small loss."""
    return [(s, {"reward": 0.2 + 0.02 * s + 0.01 * (s % 3), "reward_std": 0.3 + 0.01 * (s % 2),
                 "entropy": 1.1 - 0.002 * s, "kl": 0.01 + 0.0005 * s, "loss": 0.02,
                 "grad_norm": 0.5 + 0.01 * (s % 4)}) for s in range(1, n + 1)]


def post(client: TestClient, run_id: int, headers: dict[str, str], rows: list[Row]) -> None:
    """One report batch; ``json.dumps`` writes NaN/inf as the NaN/Infinity tokens the report
    API reads as non-finite values."""
    body = json.dumps({"rows": [{"step": s, "metrics": m} for s, m in rows]})
    reply = client.post(f"/api/runs/{run_id}/metrics", content=body,
                        headers={**headers, "Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text


def settle_now(run_id: int) -> None:
    """What the background settler does within a second (not running in these tests)."""
    with get_sessionmaker()() as db:
        settle(db, [run_id])


def reporting(client: TestClient, rows: list[Row], cut: int = 10
              ) -> tuple[int, dict[str, str]]:
    """A running run that reported ``rows`` in batches of ``cut`` steps."""
    run_id, headers = running_run(client, max_steps=1000)
    for at in range(0, len(rows), cut):
        post(client, run_id, headers, rows[at:at + cut])
    return run_id, headers


def number(value: Any) -> float | None:
    """A value as a reader sent it: NaN/inf arrive as their text, a missing one as None."""
    if value is None or value == "":
        return None
    return float(value)


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---------------------------------------------------------------- what the readers answer


def exported(client: TestClient, run_id: int, fmt: str) -> list[dict[str, Any]]:
    reply = client.get(f"/api/runs/{run_id}/export", params={"format": fmt})
    assert reply.status_code == 200, reply.text
    if fmt == "jsonl":
        return [json.loads(line) for line in reply.text.splitlines()]
    header, *lines = list(csv.reader(io.StringIO(reply.text)))
    return [{k: v for k, v in zip(header, line, strict=True) if v != ""} for line in lines]


def exported_rows(client: TestClient, run_id: int) -> list[Row]:
    """The run's rows as ``grpodeck diagnose`` would read its export."""
    return [(int(r.pop("step")), {k: float(v) for k, v in r.items()})
            for r in exported(client, run_id, "jsonl")]


def compare_points(client: TestClient, run_id: int, other: int, name: str
                   ) -> list[tuple[float, float | None]]:
    """The run's line on the compare page's chart of ``name`` (NaN/inf: the marker trace)."""
    page = client.get(f"/runs/compare?ids={run_id},{other}&metrics={name}")
    assert page.status_code == 200, page.text
    (chart,) = [el for el in html(page.text).select("#compare-charts .chart")
                if el["data-metric"] == name]
    traces = json.loads(chart["data-figure"])["data"]
    (line,) = [t for t in traces if t.get("uid") == f"run-{run_id}"]
    marks = {x: kind for t in traces if t.get("uid") == "nonfinite"
             for x, kind, said in zip(t["x"], t["text"], t["hovertext"], strict=True)
             if said.startswith(f"#{run_id} ")}
    points: list[tuple[float, float | None]] = []
    for x, y in zip(line["x"], line["y"], strict=True):
        points.append((x, float(marks.get(x, "nan")) if y is None else y))  # a gap: its marker
    return points


def readers(client: TestClient, run_id: int, name: str, step: int, other: int
            ) -> dict[str, list[tuple[float, float | None]]]:
    """Per reader, the (step, value) points of metric ``name`` it answers with (around
    ``step`` for the readers of a range)."""
    out: dict[str, list[tuple[float, float | None]]] = {}

    def series(label: str, data: dict[str, Any]) -> None:
        got = data[name]
        out[label] = [(s, number(v)) for s, v in zip(got["steps"], got["values"], strict=True)]

    for label, params in {"metrics": {}, "metrics?names": {"names": name},
                          "metrics?after": {"after": step - 3},
                          "metrics?max_points": {"max_points": 1000}}.items():
        reply = client.get(f"/api/runs/{run_id}/metrics", params=params)
        assert reply.status_code == 200, reply.text
        series(label, reply.json())
    for label, params in {"chart": {}, "chart zoomed": {"x0": step - 2, "x1": step + 2},
                          "chart zoomed, one name": {"x0": max(0, step - 5), "x1": step,
                                                     "names": name}}.items():
        reply = client.get(f"/api/runs/{run_id}/chart", params=params)
        assert reply.status_code == 200, reply.text
        assert reply.json()["level"] == 0, label  # raw points: every step is one
        series(label, reply.json()["series"])
    for fmt in ("jsonl", "csv"):
        out[f"export {fmt}"] = [(int(r["step"]), number(r[name]))
                                for r in exported(client, run_id, fmt) if name in r]
    out["compare page"] = compare_points(client, run_id, other, name)
    return out


def assert_read_once(client: TestClient, run_id: int, name: str, step: int, value: float,
                     other: int, steps: list[int]) -> None:
    """Every reader shows ``step`` once, with ``value``, among strictly increasing steps; the
    readers of the whole run show exactly ``steps``. One failure lists every reader wrong."""
    wrong = []
    for reader, points in readers(client, run_id, name, step, other).items():
        at = [p for p in points if p[0] == step]
        seen = [p[0] for p in points]
        if len(at) != 1:
            wrong.append(f"{reader}: step {step} read {len(at)} times: {at}")
        elif not same(at[0][1], value):
            wrong.append(f"{reader}: step {step} reads {at[0][1]}, not {value}")
        elif seen != sorted(set(seen)):
            wrong.append(f"{reader}: steps repeat or go back: {seen}")
        elif reader in WHOLE_RUN and seen != steps:
            wrong.append(f"{reader}: steps {seen}, not {steps}")
    assert not wrong, f"{name}:\n" + "\n".join(wrong)


WHOLE_RUN = ("metrics", "metrics?names", "metrics?max_points", "chart", "export jsonl",
             "export csv", "compare page")


def companion(client: TestClient) -> int:
    """A second run, for the compare page (it compares two runs or more)."""
    run_id, _ = reporting(client, healthy(3))
    return run_id


# ---------------------------------------------------------------- the live diagnosis


def assert_live_findings_are_the_rows(client: TestClient, run_id: int) -> list[dict]:
    """The run's findings (GET /findings, still live) are ``diagnose`` of its exported rows:
    the same checks found the same things over the same steps, and read the same metrics.
    Returns the findings."""
    rows = exported_rows(client, run_id)
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        expected = diagnose(rows, context_for(run))
    reply = client.get(f"/api/runs/{run_id}/findings")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    got = sorted((f["category"], f["metric"], f["first_step"], f["last_step"])
                 for f in body["findings"])
    want = sorted((f.category, f.metric or "", f.first_step, f.last_step)
                  for f in expected.findings)
    assert got == want, f"live findings {got} != a diagnosis of the exported rows {want}"
    assert body["metrics"] == expected.metrics
    return body["findings"]


def nonfinite_findings(findings: list[dict]) -> list[tuple[str, int, int]]:
    return [(f["metric"], f["first_step"], f["last_step"]) for f in findings
            if f["category"] == "numerical_instability" and f["evidence"].get("nonfinite_rows")]


@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restarted"])
@pytest.mark.parametrize("settled", [False, True], ids=["waiting", "settled"])
def test_a_re_sent_last_step_reaches_the_live_findings(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, restart: bool, settled: bool
) -> None:
    """Steps 1..N reported, then step N re-sent with reward NaN: the NaN is the run's, and the
    findings say so, as ``diagnose`` of the same rows does; the same for a re-sent last step
    re-sent again with only its loss, now inf (the step's reward stays NaN). "restarted": the
    re-send reaches a process without the run's state in memory, whose stored state has
    already taken step N in (written back on every batch here)."""
    monkeypatch.setenv("GRPODECK_DIAGNOSTICS_PERSIST_SECONDS", "0")
    config_module.get_settings.cache_clear()
    rows = healthy()
    run_id, headers = reporting(client, rows)
    assert nonfinite_findings(assert_live_findings_are_the_rows(client, run_id)) == []
    if settled:
        settle_now(run_id)
    if restart:  # another web process takes the re-send: nothing of this run in its memory
        state_cache.forget(run_id)
    post(client, run_id, headers, [(N, {**rows[-1][1], "reward": math.nan})])
    findings = assert_live_findings_are_the_rows(client, run_id)
    assert nonfinite_findings(findings) == [("reward", N, N)], findings
    (nan,) = [f for f in findings if f["category"] == "numerical_instability"]
    assert nan["evidence"]["example_value"] == "nan"

    post(client, run_id, headers, [(N, {"loss": math.inf})])  # loss too now, reward kept
    findings = assert_live_findings_are_the_rows(client, run_id)
    assert sorted(nonfinite_findings(findings)) == [("loss", N, N), ("reward", N, N)], findings


def test_a_re_sent_middle_step_with_nan_and_inf_reaches_the_live_findings(
        client: TestClient) -> None:
    rows = healthy()
    run_id, headers = reporting(client, rows)
    settle_now(run_id)
    post(client, run_id, headers, [(12, {**rows[11][1], "reward": math.inf})])
    findings = assert_live_findings_are_the_rows(client, run_id)
    assert nonfinite_findings(findings) == [("reward", 12, 12)], findings
    post(client, run_id, headers, [(7, {**rows[6][1], "reward": math.nan}),
                                   (N + 1, {**healthy(N + 1)[-1][1]})])
    findings = assert_live_findings_are_the_rows(client, run_id)
    assert nonfinite_findings(findings) == [("reward", 7, 12)], findings


def test_a_re_sent_step_that_is_finite_again_clears_its_nan(client: TestClient) -> None:
    """A NaN logged by mistake and re-sent as a number is gone from the run: the rows hold
    the number and the diagnosis of the rows has no NaN (the live findings follow it, as the
    page's stabilisation lets them: the finding resolves, it does not stay open)."""
    rows = healthy()
    run_id, headers = reporting(client, [*rows[:-1], (N, {**rows[-1][1], "reward": math.nan})])
    assert nonfinite_findings(assert_live_findings_are_the_rows(client, run_id)) == [
        ("reward", N, N)]
    settle_now(run_id)
    post(client, run_id, headers, [rows[-1]])
    assert exported_rows(client, run_id) == rows
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        live, want = state_cache.current_diagnosis(db, run), diagnose(rows, context_for(run))
        assert live == want, (
            f"live diagnosis {live and (live.verdict, [f.category for f in live.findings])} != "
            f"a diagnosis of the rows {(want.verdict, [f.category for f in want.findings])}")


# ---------------------------------------------------------------- every reader, once


@pytest.mark.parametrize("step", [N, 13], ids=["last step", "middle step"])
@pytest.mark.parametrize("value", [9.5, math.nan, -math.inf], ids=["number", "nan", "-inf"])
def test_a_settled_step_re_sent_is_read_once_with_its_new_value(
        client: TestClient, step: int, value: float) -> None:
    rows = healthy()
    run_id, headers = reporting(client, rows)
    other = companion(client)
    settle_now(run_id)
    post(client, run_id, headers, [(step, {**rows[step - 1][1], "reward": value})])
    every = list(range(1, N + 1))
    assert_read_once(client, run_id, "reward", step, value, other, every)
    assert_read_once(client, run_id, "loss", step, 0.02, other, every)  # the step's others
    settle_now(run_id)  # and once it is settled in its turn
    assert_read_once(client, run_id, "reward", step, value, other, every)


def test_a_settled_step_re_sent_with_newer_steps_is_read_once(client: TestClient) -> None:
    """The re-sent step arrives in a batch that also brings new steps: the waiting rows then
    start inside the settled range and end past it."""
    rows = healthy(N + 5)
    run_id, headers = reporting(client, rows[:N])
    other = companion(client)
    settle_now(run_id)
    post(client, run_id, headers, [(N - 1, {**rows[N - 2][1], "reward": 7.0}), *rows[N:]])
    assert_read_once(client, run_id, "reward", N - 1, 7.0, other, list(range(1, N + 6)))


def test_a_waiting_step_re_sent_is_read_once_with_its_new_value(client: TestClient) -> None:
    """A step re-sent before it was settled: its new values go over the old ones (the metrics
    it did not re-send keep theirs), in every reader, before and after settling."""
    rows = healthy()
    run_id, headers = reporting(client, rows)
    other = companion(client)
    post(client, run_id, headers, [(N, {"reward": 4.0}), (15, {"reward": math.nan})])
    every = list(range(1, N + 1))
    for settled in (False, True):
        if settled:
            settle_now(run_id)
        assert_read_once(client, run_id, "reward", N, 4.0, other, every)
        assert_read_once(client, run_id, "reward", 15, math.nan, other, every)
        assert_read_once(client, run_id, "loss", N, 0.02, other, every)
    assert nonfinite_findings(assert_live_findings_are_the_rows(client, run_id)) == [
        ("reward", 15, 15)]


def test_steps_out_of_order_are_read_once_each(client: TestClient) -> None:
    """Later steps first, some settled in between, one step sent twice with two values: each
    reader shows every step once, in order; the findings are the rows'."""
    rows = healthy()
    run_id, headers = running_run(client, max_steps=1000)
    other = companion(client)
    post(client, run_id, headers, rows[20:])
    settle_now(run_id)
    post(client, run_id, headers, [*rows[:10], (25, {"reward": 3.0})])
    post(client, run_id, headers, [*rows[10:20], (25, {"reward": math.nan})])
    every = list(range(1, N + 1))
    assert_read_once(client, run_id, "reward", 25, math.nan, other, every)
    assert_read_once(client, run_id, "reward", 5, rows[4][1]["reward"], other, every)
    assert nonfinite_findings(assert_live_findings_are_the_rows(client, run_id)) == [
        ("reward", 25, 25)]


def test_summaries_count_a_re_sent_step_once(client: TestClient) -> None:
    """A chart drawn from summaries (a rollup level above 0) counts a re-sent settled step
    once, while the new value waits and once it is settled; then its bucket's mean and max
    hold the new value. (While it waits the bucket still holds the old value: a re-sent step
    inside the settled range shows in the summaries once settled, ``waiting.merge_buckets``.)"""
    rows = healthy(64)
    run_id, headers = reporting(client, rows, cut=16)
    settle_now(run_id)
    post(client, run_id, headers, [(40, {"reward": 50.0})])

    def summary() -> dict[str, Any]:
        reply = client.get(f"/api/runs/{run_id}/chart", params={"names": "reward",
                                                               "max_points": 8})
        assert reply.status_code == 200, reply.text
        assert reply.json()["level"] >= 1
        return reply.json()["series"]["reward"]

    assert sum(summary()["n"]) == 64
    settle_now(run_id)
    drawn = summary()
    assert sum(drawn["n"]) == 64
    assert max(drawn["max"]) == 50.0
    values = [m["reward"] for _, m in rows]
    values[39] = 50.0
    assert sum(mean * n for mean, n in zip(drawn["values"], drawn["n"], strict=True)) == (
        pytest.approx(sum(values)))


@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restarted"])
def test_a_history_replayed_a_chunk_at_a_time_gives_the_findings_of_the_whole(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, restart: bool) -> None:
    """The live state is rebuilt (a re-sent early step) and reloaded (another process) from
    the stored history one chunk of steps at a time (``WINDOW_CHUNKS``; a 1M-step history at
    once took gigabytes): its findings are still ``diagnose`` of the whole exported history,
    including a collapse that spans chunks and a NaN at the last step of one."""
    monkeypatch.setenv("GRPODECK_DIAGNOSTICS_PERSIST_SECONDS", "0")
    config_module.get_settings.cache_clear()
    monkeypatch.setattr(state_cache, "WINDOW_CHUNKS", 1)
    rows = healthy(3_000)
    rows = [(s, {**m, "entropy": 1.1 if s < 1_500 else 0.01}) for s, m in rows]
    run_id, headers = reporting(client, rows, cut=500)
    settle_now(run_id)
    if restart:
        state_cache.forget(run_id)
    edge = 2 * 1_024 - 1  # the last step of a chunk, so of a window
    post(client, run_id, headers, [(edge, {**rows[edge - 1][1], "loss": math.nan})])
    findings = assert_live_findings_are_the_rows(client, run_id)
    assert ("loss", edge, edge) in nonfinite_findings(findings)
    assert any(f["category"] == "entropy_collapse" for f in findings), findings
