"""A run whose metrics hold NaN or +-inf (a diverging run, an imported log) still shows its page,
its charts and its live points: non-finite values are gaps with a marker, and listed."""

from __future__ import annotations

import html
import json
import re

from fastapi.testclient import TestClient

from tests.app.conftest import running_run

NAN_ROWS = (
    [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 0.0}} for s in range(1, 12)]
    + [{"step": s, "metrics": {"reward": "nan", "loss": 0.0}} for s in (12, 13)]
    + [{"step": 14, "metrics": {"reward": 0.5, "loss": "-inf"}}]
)


def figures(page: str) -> dict[str, dict]:
    """The plotly figures a page carries in its data-figure attributes, by chart id."""
    found = re.findall(r'id="chart-([\w-]+)" data-figure="([^"]*)"', page)
    return {key: json.loads(html.unescape(attr)) for key, attr in found}


def report(client: TestClient, run_id: int, headers: dict[str, str], rows: list[dict]) -> None:
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200, reply.text


def test_run_page_with_nan_and_inf_metrics_draws_gaps_markers_and_a_note(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, NAN_ROWS)
    # 1e400 is read as inf by JSON parsers: it must be stored and drawn like any inf
    raw = '{"rows": [{"step": 15, "metrics": {"reward": 1e400, "loss": NaN}}]}'
    reply = client.post(f"/api/runs/{run_id}/metrics", content=raw,
                        headers={**headers, "content-type": "application/json"})
    assert reply.status_code == 200, reply.text

    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    charts = figures(page.text)
    reward = charts["reward"]["data"]
    assert reward[0]["y"][11:15] == [None, None, 0.5, None]  # gaps, not NaN (JSON has none)
    marker = next(t for t in reward if t["name"] == "NaN/inf")
    assert list(zip(marker["x"], marker["text"])) == [(12, "NaN"), (13, "NaN"), (15, "inf")]
    assert charts["reward"]["layout"]["yaxis3"]["visible"] is False
    note = re.search(r'id="nonfinite-reward"[^>]*>([^<]*)<', page.text)
    assert note and note.group(1) == "3 non-finite values: NaN at steps 12, 13; inf at step 15"
    loss_note = re.search(r'id="nonfinite-loss"[^>]*>([^<]*)<', page.text)
    assert loss_note and loss_note.group(1) == ("2 non-finite values: -inf at step 14; "
                                                "NaN at step 15")

    fragment = client.get(f"/runs/{run_id}/_charts")
    assert fragment.status_code == 200 and 'id="nonfinite-reward"' in fragment.text


def test_live_points_with_nan_and_inf_answer_200(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, NAN_ROWS)
    for params in ({"after": 11}, {"after": 11, "max_points": 3}, {"names": "reward,loss"}):
        reply = client.get(f"/api/runs/{run_id}/metrics", params=params)
        assert reply.status_code == 200, params
    newer = client.get(f"/api/runs/{run_id}/metrics", params={"after": 11}).json()
    assert newer["reward"] == {"steps": [12, 13, 14], "values": ["nan", "nan", 0.5]}
    assert newer["loss"]["values"] == [0.0, 0.0, "-inf"]


def test_a_chart_with_finite_values_has_no_marker_or_note(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, NAN_ROWS[:11])
    page = client.get(f"/runs/{run_id}").text
    assert all(t["name"] != "NaN/inf" for t in figures(page)["reward"]["data"])
    assert "nonfinite-" not in page


def test_a_run_that_stays_nan_draws_a_bounded_row_of_markers() -> None:
    from app.charts.figures import MAX_MARKERS, run_figures
    from app.metrics.series import Series

    steps = list(range(50_000))
    series = {"reward": Series(steps=steps, values=[float("nan")] * len(steps))}
    chart = run_figures(series)[0]
    marker = next(t for t in chart["figure"]["data"] if t["name"] == "NaN/inf")
    assert len(marker["x"]) <= MAX_MARKERS and marker["x"][0] == 0
    assert chart["note"].startswith("50000 non-finite values: NaN at steps 0, 1, 2")
    assert chart["note"].endswith("and 49992 more")


def strict_json(text: str) -> object:
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in an API answer")
    return json.loads(text, parse_constant=refuse)


def test_a_summarised_chart_answers_nan_and_inf_as_text_in_means_bands_and_live_points(
        client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": 0.5, "loss": 1.0}} for s in range(1, 101)]
    rows[39]["metrics"]["reward"] = "nan"
    rows[69]["metrics"]["loss"] = "inf"
    report(client, run_id, headers, rows)
    chart = client.get(f"/api/runs/{run_id}/chart", params={"max_points": 8})
    assert chart.status_code == 200 and chart.headers["content-type"] == "application/json"
    answer = strict_json(chart.text)
    assert answer["level"] >= 1  # buckets: a mean with its band, and the non-finite point
    reward = answer["series"]["reward"]
    at = reward["steps"].index(40)
    assert (reward["values"][at], reward["min"][at], reward["max"][at]) == ("nan", "nan", "nan")
    assert "inf" in answer["series"]["loss"]["max"]
    assert all(isinstance(v, float) for i, v in enumerate(reward["values"]) if i != at)
    live = strict_json(client.get(f"/api/runs/{run_id}/metrics", params={"after": 38}).text)
    assert live["reward"]["values"][:3] == [0.5, "nan", 0.5]


def test_finite_values_whose_sum_overflows_stay_numbers(client: TestClient) -> None:
    """Two values near the float limit add up to inf: they are still finite, still numbers."""
    run_id, headers = running_run(client)
    report(client, run_id, headers, [{"step": s, "metrics": {"reward": 1e308}}
                                     for s in (1, 2)])
    answer = strict_json(client.get(f"/api/runs/{run_id}/metrics").text)
    assert answer["reward"] == {"steps": [1, 2], "values": [1e308, 1e308]}
