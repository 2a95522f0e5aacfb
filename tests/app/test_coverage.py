"""What a diagnosis could check, in the dashboard (issue 23): the findings API's metrics and
unchecked, the run page's "checked / could not check", the unknown verdict stored and filtered,
and the import form's key mapping. Logs from bench/simulated_logs.py (seeded simulations)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from bench.simulated_logs import ODD_KEYS, handwritten_stalled, verl_collapse
from tests.app.conftest import one


def upload(client: TestClient, name: str, text: str, mapping: str = "") -> int:
    page = client.post("/runs/import", files={"log": (name, text)}, data={"map": mapping},
                       follow_redirects=False)
    assert page.status_code == 303, page.text
    return int(page.headers["location"].rsplit("/", 1)[1])


def test_unknown_keys_make_an_unknown_run_with_its_reason(client: TestClient) -> None:
    run_id = upload(client, "loop.log", handwritten_stalled(keys=ODD_KEYS))
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert body["verdict"] == "unknown" and body["findings"] == []
    assert body["metrics"] == [] and body["unchecked"]["stalled"] == "reward"
    assert body["reason"] == "no reward metric among: Div, Obj, Score"
    listed = client.get("/api/runs", params={"verdict": "unknown"}).json()
    assert [r["id"] for r in listed] == [run_id]
    page = client.get(f"/runs/{run_id}").text
    assert one(page, "#run-verdict").get_text() == "unknown"
    assert "no reward metric among: Div, Obj, Score" in one(page, "#coverage-reason").text


def test_the_run_page_and_api_say_what_was_checked_and_what_not(client: TestClient) -> None:
    run_id = upload(client, "verl.log", verl_collapse())
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert {"reward", "entropy", "kl", "completions/clipped_ratio"} <= set(body["metrics"])
    assert body["unchecked"]["zero_spread"] == "frac_reward_zero_std or reward_std or reward_max"
    assert body["reason"] is None
    assert "reward_collapse" in {f["category"] for f in body["findings"]}
    page = client.get(f"/runs/{run_id}").text
    checked = one(page, "#coverage-checked").get_text()
    assert checked.startswith("checked: ") and "reward" in checked and "entropy" in checked
    unchecked = one(page, "#coverage-unchecked").get_text()
    assert "not run, for lack of data: " in unchecked
    assert "zero spread (needs frac_reward_zero_std or reward_std or reward_max)" in unchecked


def test_the_import_form_takes_a_key_mapping(client: TestClient) -> None:
    run_id = upload(client, "loop.log", handwritten_stalled(keys=ODD_KEYS), "Score=reward, Div=kl")
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert body["verdict"] == "warning" and body["metrics"] == ["kl", "reward"]
    assert "stalled" in {f["category"] for f in body["findings"]}
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["spec"]["mapping"] == "Div=kl, Score=reward"


def test_a_malformed_mapping_is_a_field_error(client: TestClient) -> None:
    page = client.post("/runs/import", files={"log": ("loop.log", handwritten_stalled())},
                       data={"map": "Reward"})
    assert page.status_code == 422
    assert "'Reward' is not KEY=NAME" in one(page.text, "#e-map").get_text()
    assert one(page.text, "#f-map")["value"] == "Reward"
    assert client.get("/api/runs").json() == []
