"""The runs list's numbers on SQLite and PostgreSQL: last and best reward, KL, zero-spread
share and a sparkline of bucket means (a long run reads summaries, not points); a run without
metrics shows empty cells, never "None"."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import one, queued_run, receive


def test_numbers_and_sparkline_per_row(client: TestClient) -> None:
    long_run, _ = queued_run()
    empty, _ = queued_run()
    receive(long_run, [(s, {"reward": 0.9 if s == 500 else s / 2000, "kl": 0.5,
                            "frac_reward_zero_std": 0.125}) for s in range(1, 2001)])
    page = client.get("/runs").text
    row = one(page, f"#run-row-{long_run}")
    assert row.select_one("td.col-reward").get_text() == "1"
    assert row.select_one("td.col-best").get_text() == "1"
    assert row.select_one("td.col-kl").get_text() == "0.5"
    assert row.select_one("td.col-zero_spread").get_text() == "12%"
    points = row.select_one("svg.spark polyline")["points"].split()
    assert 2 <= len(points) <= 40  # bucket means of a level that fits, not 2,000 points
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[0] > ys[-1]  # the reward rose: the line ends higher (SVG y grows downwards)
    cells = one(page, f"#run-row-{empty}").select("td.num")
    assert all(c.get_text() == "" for c in cells if "col-runtime" not in c["class"])
    assert "None" not in one(page, f"#run-row-{empty}").get_text()
