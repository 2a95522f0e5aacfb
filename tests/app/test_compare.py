"""The compare page: the URL holds the selection, charts overlay each chosen metric of every
run (downsampled like the run page), findings side by side, and only differing spec fields."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from app.core.config import get_settings
from tests.app.conftest import html, one, running_run


def reporting(client: TestClient, steps: int, **spec: object) -> int:
    run_id, headers = running_run(client, **spec)
    rows = [{"step": s, "metrics": {"reward": s * spec.get("learning_rate", 1e-5) * 1e4,
                                    "kl": 0.01 * s, "loss": 0.1}} for s in range(1, steps + 1)]
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200, reply.text
    return run_id


def figures(page: str) -> dict[str, dict]:
    return {el["data-metric"]: json.loads(el["data-figure"])
            for el in html(page).select("#compare-charts .chart")}


def test_three_runs_overlaid_with_their_differences(client: TestClient) -> None:
    a = reporting(client, 5, name="a", learning_rate=1e-5)
    b = reporting(client, 5, name="b", learning_rate=3e-5)
    c = reporting(client, 3000, name="c", learning_rate=1e-5, beta=0.0)
    picked = client.get(f"/runs/compare?ids={a}&ids={b}&ids={c}", follow_redirects=False)
    assert picked.status_code == 303 and picked.headers["location"] == (
        f"/runs/compare?ids={a}%2C{b}%2C{c}")
    page = client.get(f"/runs/compare?ids={a},{b},{c}")
    assert page.status_code == 200
    charts = figures(page.text)
    assert list(charts) == ["reward", "kl"]  # the defaults these runs logged, in their order
    traces = charts["reward"]["data"]
    assert [t["meta"] for t in traces] == [a, b, c]
    assert traces[1]["y"][:2] == [0.3, 0.6] and traces[0]["x"] == [1, 2, 3, 4, 5]
    limit = get_settings().chart_max_points  # downsampled exactly as the run page's charts
    same = client.get(f"/api/runs/{c}/metrics", params={"names": "reward", "max_points": limit})
    assert traces[2]["x"] == same.json()["reward"]["steps"] and len(traces[2]["x"]) <= limit < 3000
    rows = {tr.th.get_text(): [td.get_text() for td in tr.select("td")]
            for tr in html(page.text).select("#spec-diff tbody tr")}
    assert rows == {"beta": ["0.04", "0.04", "0.0"],
                    "learning_rate": ["1e-05", "3e-05", "1e-05"]}
    highlighted = [td.get_text() for td in html(page.text).select("#spec-diff td.differs")]
    assert highlighted == ["0.0", "3e-05"]
    for run_id in (a, b, c):
        assert one(page.text, f"#compare-run-{run_id}").a["href"] == f"/runs/{run_id}"

    only_loss = figures(client.get(f"/runs/compare?ids={a},{b}&metrics=loss,nope").text)
    assert list(only_loss) == ["loss"] and len(only_loss["loss"]["data"]) == 2


def test_bad_selections_are_refused_with_the_reason(client: TestClient) -> None:
    a = reporting(client, 2, name="a")
    for query, status, words in ((f"ids={a}", 400, "pick 2 to 8 runs"),
                                 (f"ids={a},x", 400, "run ids separated by commas"),
                                 (f"ids={a},99999", 404, "99999 not found"),
                                 ("ids=" + ",".join(map(str, range(1, 10))), 400, "got 9")):
        reply = client.get(f"/runs/compare?{query}")
        assert reply.status_code == status and words in reply.json()["detail"], query
