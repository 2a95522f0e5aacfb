"""Sorting the runs list: every sortable column orders ALL matching runs on the server (a
whitelisted key, SQL ORDER BY, unknown values last, ties by id), pages keep the sort, and a
sort parameter outside the whitelist is a clear 400 that never reaches the SQL."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.db import get_sessionmaker
from app.metrics.models import MetricRollup
from app.metrics.settler import settle_all
from app.runs.models import Run
from tests.app.conftest import html, receive
from tests.conftest import tiny_spec
from tests.settled import add_points

PER_PAGE = 20


def stored(name: str, reward: float | None = None, kl: float | None = None) -> int:
    """A finished run, stored in a transaction of its own (``add``)."""
    with get_sessionmaker()() as db:
        run_id = add(db, name, reward, kl)
        db.commit()
        return run_id


def add(db: Session, name: str, reward: float | None = None, kl: float | None = None) -> int:
    """A finished run; with ``reward``/``kl`` its last points and the reward's level-1 summary
    written straight into the store and the finest stored summary level (cheap: the sort reads only these)."""
    run = Run(name=name, spec=tiny_spec(name=name), status="succeeded", max_steps=5)
    db.add(run)
    db.flush()
    if reward is not None:
        add_points(db, run.id, [("reward", 1, reward / 2), ("reward", 2, reward),
                                ("reward", 3, math.nan), ("kl", 2, kl)])
        db.add_all([MetricRollup(run_id=run.id, level=2, name="reward", bucket=0, n=2,
                                 vsum=1.5 * reward, vmin=min(reward, reward / 2),
                                 vmax=max(reward, reward / 2), first_step=1, last_step=3,
                                 nonfinite=1, nonfinite_step=3, nonfinite_raw="nan")])
    return run.id


@pytest.fixture
def runs() -> dict[str, int]:
    """61 runs: the first created has the best reward and the lowest KL and sorts last by
    name; the last created the reverse; one run in between logged nothing. One transaction for
    all of them (a commit each was most of every test's time here)."""
    with get_sessionmaker()() as db:
        out = {"first": add(db, "zzz-first", reward=9.0, kl=0.0)}
        for i in range(58):
            out[f"mid-{i}"] = add(db, f"mid-{i:03d}", reward=0.5 + 0.001 * i, kl=0.1 + 0.001 * i)
            if i == 30:
                out["nothing"] = add(db, "mid-nothing")
        out["last"] = add(db, "aaa-last", reward=-1.0, kl=5.0)
        db.commit()
    return out


def pages(client: TestClient, query: str) -> list[list[int]]:
    """Every page of the list under ``query``, each as its row ids."""
    out, page = [], 1
    while True:
        reply = client.get(f"/runs?{query}&per_page={PER_PAGE}&page={page}")
        assert reply.status_code == 200, reply.text
        out.append([int(tr["id"].removeprefix("run-row-"))
                    for tr in html(reply.text).select("tr[id]")])
        if not html(reply.text).select_one("a[rel=next]"):
            return out
        page += 1


@pytest.mark.parametrize(("query", "top", "bottom"), [
    ("sort=reward", "first", "nothing"), ("sort=reward&dir=asc", "last", "nothing"),
    ("sort=best", "first", "nothing"), ("sort=kl&dir=asc", "first", "nothing"),
    ("sort=kl&dir=desc", "last", "nothing"), ("sort=name", "last", "first"),
    ("sort=name&dir=desc", "first", "last"), ("sort=id&dir=asc", "first", "last"),
    ("sort=oldest", "first", "last"), ("", "last", "first")])
def test_a_column_sorts_every_run_not_the_page(client: TestClient, runs: dict[str, int],
                                               query: str, top: str, bottom: str) -> None:
    listed = pages(client, query)
    assert len(listed) == 4 and sum(map(len, listed)) == len(runs)
    flat = [i for page in listed for i in page]
    assert len(set(flat)) == len(flat)  # the pages neither overlap nor skip a run
    assert flat[0] == runs[top] and flat[-1] == runs[bottom], query  # unknown values last
    everything = client.get(f"/runs?{query}&per_page=200")
    assert [int(tr["id"].removeprefix("run-row-"))
            for tr in html(everything.text).select("tr[id]")] == flat  # the pages keep the sort


def test_the_headers_link_to_the_sorted_list_and_say_how_it_is_sorted(
        client: TestClient, runs: dict[str, int]) -> None:
    page = html(client.get(f"/runs?sort=reward&per_page={PER_PAGE}").text)
    reward = page.select_one("th.col-reward")
    assert reward["aria-sort"] == "descending"
    assert reward.a["href"] == f"/runs?sort=reward&dir=asc&per_page={PER_PAGE}"  # toggles
    assert page.select_one("a.sort-col[data-sort=kl]")["href"] == (
        f"/runs?sort=kl&dir=desc&per_page={PER_PAGE}")  # a number: highest first
    assert page.select_one("a.sort-col[data-sort=name]")["href"] == (
        f"/runs?sort=name&dir=asc&per_page={PER_PAGE}")
    assert page.select_one("a[rel=next]")["href"] == (
        f"/runs?sort=reward&dir=desc&page=2&per_page={PER_PAGE}")
    assert page.select_one('#run-filters select[name="sort"] option[selected]')["value"] == "reward"
    assert page.select_one('#run-filters select[name="dir"] option[selected]')["value"] == "desc"
    name = page.select_one(f"#run-row-{runs['first']} td.name a")
    assert name["title"] == "zzz-first"  # the full name on hover, the cell cut to one line


def test_a_metric_sort_sees_batches_once_the_settler_spread_them(client: TestClient) -> None:
    """Received steps wait in the inbox until the settler spreads them (the sort itself never
    takes a run's write lock, tests/app/test_reads_never_wait.py): after one settler pass a
    never-opened run is not sorted as unknown."""
    low, high = stored("low"), stored("high")
    receive(low, [(1, {"reward": 0.1})])
    receive(high, [(1, {"reward": 0.9})])
    assert settle_all(get_sessionmaker()) == 2  # what the web process's settler thread does
    for query, top in (("sort=reward", high), ("sort=reward&dir=asc", low)):
        rows = html(client.get(f"/runs?{query}").text).select("tr[id]")
        assert [tr["id"] for tr in rows] == [f"run-row-{top}", f"run-row-{low + high - top}"]


@pytest.mark.parametrize("params", [
    {"sort": "reward; DROP TABLE runs; --"}, {"sort": "id desc"}, {"sort": "__class__"},
    {"sort": "runs.id"}, {"sort": "(SELECT 1)"}, {"sort": "reward", "dir": "asc; DELETE FROM runs"},
    {"sort": "reward", "dir": "ASC"}, {"dir": "sideways"}, {"sort": "x" * 5000}])
def test_a_sort_outside_the_whitelist_is_a_clear_400(client: TestClient, runs: dict[str, int],
                                                     params: dict[str, str]) -> None:
    for path in ("/runs", "/runs/_table", "/api/runs"):
        reply = client.get(path, params=params)
        assert reply.status_code == 400, (path, params, reply.status_code)
        assert "unknown sort" in reply.text or "dir must be asc or desc" in reply.text
    assert client.get("/api/runs", params={"per_page": 200}).headers["x-total-count"] == str(
        len(runs))  # nothing was dropped or deleted
