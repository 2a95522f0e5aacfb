"""The compare page: the URL holds the selection, charts overlay each chosen metric of every
run (read as the run page's charts read them: bounded by the point budget, not by the runs'
length), findings side by side, only differing spec fields, and a live fragment polled while
any run is queued or running."""

from __future__ import annotations

import json
import math

from fastapi.testclient import TestClient

from app.core.config import get_settings
from tests.app.conftest import html, metric_rows_read, one, receive, running_run


def reporting(client: TestClient, steps: int, **spec: object) -> int:
    return reporting_live(client, steps, **spec)[0]


def reporting_live(client: TestClient, steps: int, **spec: object) -> tuple[int, dict[str, str]]:
    """A running run that reported ``steps`` steps: (id, the worker's headers)."""
    run_id, headers = running_run(client, **spec)
    rows = [{"step": s, "metrics": {"reward": s * spec.get("learning_rate", 1e-5) * 1e4,
                                    "kl": 0.01 * s, "loss": 0.1}} for s in range(1, steps + 1)]
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200, reply.text
    return run_id, headers


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
    traces = [t for t in charts["reward"]["data"] if not str(t["meta"]).startswith("band")]
    assert [t["meta"] for t in traces] == [a, b, c]
    assert traces[1]["y"][:2] == [0.3, 0.6] and traces[0]["x"] == [1, 2, 3, 4, 5]
    limit = get_settings().chart_max_points  # read exactly as the run page's charts read it
    same = client.get(f"/api/runs/{c}/chart", params={"names": "reward", "max_points": limit})
    assert same.json()["level"] == 1  # 3000 steps > the budget: buckets of 16 steps
    assert traces[2]["x"] == same.json()["series"]["reward"]["steps"]
    assert traces[2]["y"] == same.json()["series"]["reward"]["values"]
    assert len(traces[2]["x"]) <= limit < 3000
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


def test_a_long_comparison_reads_about_as_many_rows_as_it_draws(client: TestClient) -> None:
    """20,000 stored steps: the compare request reads the run's summaries (min and max per
    bucket), not its points, and still shows the spike and the NaN."""
    long_id, _ = running_run(client, name="long")
    steps = 20_000
    receive(long_id, [(s, {"reward": 0.1 * math.sin(s / 40) + (5.0 if s == 12_345 else 0.0),
                            "kl": math.nan if s == 15_000 else 0.001 * (s % 97)})
                       for s in range(1, steps + 1)])
    short = reporting(client, 10, name="short")
    url = f"/runs/compare?ids={long_id},{short}&metrics=reward,kl"
    assert client.get(url).status_code == 200  # the first read brings the coarse levels up to date
    with metric_rows_read() as counts:
        page = client.get(url)
    assert page.status_code == 200
    limit, drawn = get_settings().chart_max_points, 2
    total = sum(counts)
    assert total <= limit * drawn < steps, counts  # the points alone are 2 x 20,000 rows
    charts = figures(page.text)
    long_reward = next(t for t in charts["reward"]["data"] if t.get("meta") == long_id)
    assert 10 < len(long_reward["x"]) <= limit
    upper = next(t for t in charts["reward"]["data"] if t.get("uid") == f"run-{long_id}-max")
    assert max(upper["y"]) == 5.0 + 0.1 * math.sin(12_345 / 40)  # the spike survives, in the band
    assert upper["fill"] == "tonexty" and max(long_reward["y"]) < 5  # the line: bucket means
    marker = charts["kl"]["data"][-1]  # the NaN: a red marker, as on the run page
    assert marker["meta"] == "nonfinite" and marker["x"] == [15_000]
    assert marker["hovertext"] == [f"#{long_id} long: NaN at step 15000"]
    assert charts["kl"]["layout"]["yaxis3"]["overlaying"] == "y"


def test_the_live_fragment_polls_while_a_run_is_live_and_then_stops(client: TestClient) -> None:
    a, headers = reporting_live(client, 3, name="live-a")
    b, b_headers = reporting_live(client, 4, name="b")
    assert client.post(f"/api/runs/{b}/finished", json={"returncode": 0},
                       headers=b_headers).status_code == 200  # one live run is enough to poll
    page = client.get(f"/runs/compare?ids={a},{b}&metrics=reward")
    cards = one(page.text, "#compare-runs")
    assert cards["data-live"] == "1" and cards["hx-trigger"] == "every 5s"
    assert cards["hx-get"] == f"/runs/compare/_live?ids={a}%2C{b}&metrics=reward"
    assert cards["hx-swap"] == "outerHTML"
    assert not one(page.text, "#compare-charts").has_attr("hx-swap-oob")

    more = [{"step": s, "metrics": {"reward": 0.1 * s}} for s in range(4, 8)]
    assert client.post(f"/api/runs/{a}/metrics", json={"rows": more},
                       headers=headers).status_code == 200
    fragment = client.get(cards["hx-get"])
    assert fragment.status_code == 200
    polled = one(fragment.text, "#compare-runs")
    assert polled["hx-trigger"] == "every 5s" and polled["hx-get"] == cards["hx-get"]
    assert "step 7 / " in one(fragment.text, f"#compare-run-{a}").get_text()
    charts = one(fragment.text, "#compare-charts")
    assert charts["hx-swap-oob"] == "true"  # replaces the page's charts, out of band
    reward = json.loads(charts.select_one('.chart[data-metric="reward"]')["data-figure"])
    assert reward["data"][0]["x"] == list(range(1, 8)) and reward["data"][0]["uid"] == f"run-{a}"
    assert reward["layout"]["uirevision"] == "keep"  # plotly keeps the reader's zoom
    assert html(fragment.text).select("h1, #spec-diff, #compare-metrics") == []  # fragment only

    done = client.post(f"/api/runs/{a}/finished", json={"returncode": 0}, headers=headers)
    assert done.status_code == 200, done.text
    ended = one(client.get(cards["hx-get"]).text, "#compare-runs")
    assert ended["data-live"] == "0"
    assert not any(ended.has_attr(a) for a in ("hx-get", "hx-trigger"))  # polling stops
    assert not one(client.get(f"/runs/compare?ids={a},{b}").text,
                   "#compare-runs").has_attr("hx-trigger")


def test_a_deleted_run_stops_the_live_comparison_with_the_reason(client: TestClient) -> None:
    a, _ = reporting_live(client, 3, name="stays")
    b, b_headers = reporting_live(client, 3, name="goes")
    live_url = one(client.get(f"/runs/compare?ids={a},{b}").text, "#compare-runs")["hx-get"]
    assert client.post(f"/api/runs/{b}/finished", json={"returncode": 0},
                       headers=b_headers).status_code == 200
    assert client.delete(f"/api/runs/{b}").status_code == 204
    gone = client.get(live_url)
    assert gone.status_code == 286  # htmx cancels the polling on this status
    cards = one(gone.text, "#compare-runs")
    assert f"run(s) {b} not found" in cards.get_text() and not cards.has_attr("hx-trigger")


def test_the_live_fragment_renders_the_readers_chart_settings(client: TestClient) -> None:
    """static/compare.js sends smooth/log/x with each poll: the fragment's controls show them,
    so a refresh never snaps a slider or a checkbox back to its default."""
    a, _ = reporting_live(client, 3, name="kept-a")
    b, _ = reporting_live(client, 3, name="kept-b")
    settings = "smooth=reward:0.6,kl:0&log=kl&x=percent"
    page = client.get(f"/runs/compare?ids={a},{b}&metrics=reward,kl&{settings}")
    live_url = one(page.text, "#compare-runs")["hx-get"]
    assert "smooth" not in live_url  # the script adds the current settings to each poll
    for text in (page.text, client.get(f"{live_url}&{settings}").text):
        charts = one(text, "#compare-charts")
        assert [s["value"] for s in charts.select("input.compare-smoothing")] == ["0.6", "0"]
        assert [o.get_text() for o in charts.select("output")] == ["0.6", "0"]
        assert [c.has_attr("checked") for c in charts.select("input.compare-log")] == [False, True]
    assert one(page.text, "#compare-x option[selected]")["value"] == "percent"
    plain = one(client.get(live_url).text, "#compare-charts")
    assert [s["value"] for s in plain.select("input.compare-smoothing")] == ["0", "0"]


def test_bad_chart_settings_are_refused_with_the_reason(client: TestClient) -> None:
    a, _ = reporting_live(client, 2, name="bad-a")
    b, _ = reporting_live(client, 2, name="bad-b")
    for query, words in (("smooth=reward:2", "smooth must be"), ("smooth=reward", "smooth must"),
                         ("smooth=reward:nan", "smooth must"), ("x=sideways", "x must be one"),
                         ("hide=calm", "hide must be run ids"), ("hide=-1", "hide must be")):
        for path in ("/runs/compare", "/runs/compare/_live"):
            reply = client.get(f"{path}?ids={a},{b}&{query}")
            assert reply.status_code == 400 and words in reply.json()["detail"], (path, query)


def test_config_differences_fold_below_the_charts_without_raw_nulls(client: TestClient) -> None:
    a, _ = reporting_live(client, 2, name="blank-a")
    b, _ = reporting_live(client, 2, name="blank-b", eval_split="test", beta=0.1)
    page = html(client.get(f"/runs/compare?ids={a},{b}").text)
    order = [el.get("id") for el in page.select("#compare-charts, #compare-runs, #spec-diff-panel")]
    assert order == ["compare-charts", "compare-runs", "spec-diff-panel"]
    panel = page.select_one("#spec-diff-panel")
    assert panel.name == "details" and not panel.has_attr("open")
    rows = {tr.th.get_text(): [td.get_text() for td in tr.select("td")]
            for tr in panel.select("#spec-diff tbody tr")}
    assert rows == {"beta": ["0.04", "0.1"], "eval_split": ["not set", "test"]}
    assert not [td for td in panel.select("td") if "null" in td.get_text()]


def test_hidden_runs_come_from_the_url_and_keep_their_place_in_it(client: TestClient) -> None:
    """Issue 56 (8e): ``hide=ID`` renders that run's checkbox unchecked (static/compare.js hides
    its lines), and the canonical address the list's checkboxes are sent to keeps it."""
    a, _ = reporting_live(client, 2, name="hide-a")
    b, _ = reporting_live(client, 2, name="hide-b")
    page = client.get(f"/runs/compare?ids={a},{b}&hide={b}").text
    assert [c.has_attr("checked") for c in html(page).select("input.compare-run-shown")] == [
        True, False]
    moved = client.get(f"/runs/compare?ids={a}&ids={b}&hide={b}", follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"].endswith(f"&hide={b}")
