"""Bad input gets a clear 4xx with a reason, never a 500, and stores nothing: non-finite and
out-of-range numbers, huge or unstorable text, and bodies over their endpoint's size limit."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import SPEC, queued_run, running_run

JSON = {"content-type": "application/json"}


def post_raw(client: TestClient, url: str, text: str, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """Post JSON text as is: NaN, Infinity and 1e400 are spelled the way a client may send them."""
    return client.post(url, content=text.encode("utf-8", "surrogatepass"),
                       headers={**JSON, **(headers or {})})


def spec_with(extra: str) -> str:
    return json.dumps(SPEC)[:-1] + ", " + extra + "}"


@pytest.mark.parametrize("extra,field", [
    ('"learning_rate": NaN', "learning_rate"),
    ('"beta": Infinity', "beta"),
    ('"epsilon": -Infinity', "epsilon"),
    ('"temperature": NaN', "temperature"),
    ('"seed": 1180591620717411303424', "seed"),  # 2**70
    ('"seed": 4294967296', "seed"),  # 2**32: numpy's seed range ends below it
    ('"max_prompt_length": 1e30', "max_prompt_length"),
    ('"per_device_train_batch_size": 400000000000000000', "per_device_train_batch_size"),
    ('"beta": 1e6', "beta"),
    ('"max_steps": 1e300', "max_steps"),
    ('"model": "a/' + "b" * 5000 + '"', "model"),
    ('"model": "' + "m" * 300 + '"', "model"),  # too long for a file name: no OSError
    ('"dataset_config": "' + "x" * 100_000 + '"', "dataset_config"),
    ('"name": "\\ud800"', "name"),  # a lone surrogate: not UTF-8
    ('"name": "a\\u0000b"', "name"),  # PostgreSQL stores no NUL
])
def test_bad_spec_values_get_422_naming_the_field(client: TestClient, extra: str, field: str) -> None:
    reply = post_raw(client, "/api/runs", spec_with(extra))
    assert reply.status_code == 422, reply.text
    assert field in {e["loc"][-1] for e in reply.json()["detail"]}
    assert len(reply.content) < 2_000  # the bad input is not echoed back whole
    assert client.get("/api/runs").json() == []


@pytest.mark.parametrize("reward", [
    '{"name": "length_target", "weight": NaN}',
    '{"name": "length_target", "weight": 1e9}',
    '{"name": "length_target", "params": {"target": Infinity}}',
    '{"name": "constant", "params": {"value": NaN}}',
    '{"name": "format_tag", "params": {"tag": "' + "t" * 500 + '"}}',
])
def test_bad_reward_values_get_422(client: TestClient, reward: str) -> None:
    body = json.dumps({k: v for k, v in SPEC.items() if k != "rewards"})[:-1]
    reply = post_raw(client, "/api/runs", body + ', "rewards": [' + reward + "]}")
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"][:2] == ["body", "rewards"]


def test_echoed_input_is_truncated_and_json_safe(client: TestClient) -> None:
    reply = post_raw(client, "/api/runs", spec_with('"name": "' + "n" * 10_000 + '"'))
    assert reply.status_code == 422
    echoed = reply.json()["detail"][0]["input"]
    assert echoed.startswith("nnnn") and echoed.endswith("(10000 characters)")
    assert len(echoed) < 300


def test_form_shows_non_finite_and_out_of_range_values_at_their_field(client: TestClient) -> None:
    form = {"name": "f", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
            "reward_0_name": "length_target", "reward_0_weight": "NaN", "num_generations": "4",
            "max_steps": "3", "learning_rate": "inf", "seed": str(2**40), "beta": "nan"}
    page = client.post("/runs/new", data=form)
    assert page.status_code == 422
    for field in ("learning_rate", "seed", "beta"):
        assert f'id="e-{field}"' in page.text, field
    assert 'id="e-reward_0_weight"' in page.text and "finite" in page.text  # at its row


def test_ingest_bounds_steps_and_stores_non_finite_values(client: TestClient) -> None:
    run_id, headers = running_run(client)
    url = f"/api/runs/{run_id}/metrics"
    for step in (2**63, 2**62, 2**31, -1):
        row = f'{{"step": {step}, "metrics": {{"reward": 1}}}}'
        reply = post_raw(client, url, f'{{"rows": [{row}]}}', headers)
        assert reply.status_code == 422, (step, reply.text)
    last = f'{{"step": {2**31 - 1}, "metrics": {{"reward": 1}}}}'
    huge_int = "1" + "0" * 400
    first = ('{"step": 1, "metrics": {"reward": 1e400, "kl": NaN, "loss": -Infinity, '
             f'"grad_norm": {huge_int}}}}}')
    ok = post_raw(client, url, f'{{"rows": [{last}, {first}]}}', headers)
    assert ok.status_code == 200, ok.text
    series = client.get(url).json()
    assert series["reward"] == {"steps": [1, 2**31 - 1], "values": ["inf", 1.0]}
    assert series["kl"]["values"] == ["nan"] and series["loss"]["values"] == ["-inf"]
    assert series["grad_norm"]["values"] == ["inf"]  # an integer past 1.8e308 is infinite
    assert client.get(f"/runs/{run_id}").status_code == 200


def test_ingest_rejects_unstorable_names_and_worker_fields(client: TestClient) -> None:
    run_id, headers = running_run(client)
    bad_name = post_raw(client, f"/api/runs/{run_id}/metrics",
                        '{"rows": [{"step": 1, "metrics": {"a\\u0000b": 1}}]}', headers)
    assert bad_name.status_code == 422
    queued_id, ticket = queued_run()
    bad_pid = client.post(f"/api/runs/{queued_id}/claim", json={"pid": 2**40},
                          headers={"Authorization": f"Bearer {ticket}"})
    assert bad_pid.status_code == 422
    # model output is untrusted: a NUL or lone surrogate in a completion is replaced, not a 500
    rollouts = ('{"rows": [], "rollouts": [{"step": 1, "groups": [{"index": 0, '
                '"prompt": "p\\u0000", "completions": [{"text": "x\\ud800y", '
                '"rewards": {"r": NaN}}]}]}]}')
    assert post_raw(client, f"/api/runs/{run_id}/metrics", rollouts, headers).status_code == 200
    groups = client.get(f"/api/runs/{run_id}/rollouts", params={"step": 1}).json()["groups"]
    assert groups[0]["completions"][0]["text"] == "x?y"


def test_huge_ids_in_urls_are_404(client: TestClient) -> None:
    assert client.get(f"/api/runs/{2**70}").status_code == 404
    assert client.get(f"/runs/{2**63}").status_code == 404
    run_id, _ = running_run(client)
    assert client.get(f"/api/runs/{run_id}/metrics", params={"after": 2**63}).status_code == 422


def test_body_over_the_limit_is_413_before_it_is_read(client: TestClient) -> None:
    big = spec_with('"name": "' + "x" * 300_000 + '"')
    reply = post_raw(client, "/api/runs", big)
    assert reply.status_code == 413
    assert reply.json()["detail"] == ("request body is larger than 256 KiB, the limit of "
                                      "POST /api/runs")

    def chunks():  # no Content-Length: the body is counted as it streams in
        yield spec_with('"name": "').encode()
        for _ in range(40):
            yield b"x" * 10_000
        yield b'"}'

    streamed = client.post("/api/runs", content=chunks(), headers=JSON)
    assert streamed.status_code == 413 and "256 KiB" in streamed.json()["detail"]
    form = client.post("/runs/new", data={"name": "x" * 300_000})
    assert form.status_code == 413
    assert client.get("/api/runs").json() == []


def test_ingest_has_its_own_larger_limit_checked_before_the_token(client: TestClient) -> None:
    run_id, headers = running_run(client)
    url = f"/api/runs/{run_id}/metrics"
    rows = [{"step": s, "metrics": {f"m{i}": 0.5 for i in range(100)}} for s in range(300)]
    medium = json.dumps({"rows": rows})
    assert 256 * 1024 < len(medium) < 8 * 1024 * 1024
    assert post_raw(client, url, medium, headers).status_code == 200
    huge = '{"rows": [], "pad": "' + "x" * (9 * 1024 * 1024) + '"}'
    reply = post_raw(client, url, huge)  # no token: refused on its size before anything else
    assert reply.status_code == 413 and "8 MiB" in reply.json()["detail"]


def test_upload_limit_is_a_setting(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core.config import get_settings
    from app.main import create_app

    monkeypatch.setenv("GRPODECK_UPLOAD_MAX_BODY_BYTES", "10000")
    get_settings.cache_clear()
    small = TestClient(create_app(), base_url="http://127.0.0.1")
    log = json.dumps([{"step": s, "reward": 0.5} for s in range(1, 400)]).encode()
    reply = small.post("/runs/import", files={"log": ("log.json", log)})
    assert reply.status_code == 413 and "9.76562 KiB" in reply.json()["detail"]
    assert client.get("/api/runs").json() == []


def test_a_workers_long_error_is_cut_not_refused(client: TestClient) -> None:
    """A run's end must not be lost over its prose: long error text is kept, cut."""
    run_id, headers = running_run(client)
    reply = client.post(f"/api/runs/{run_id}/finished", headers=headers, json={
        "returncode": 1, "error": "E" * 50_000, "traceback_tail": "x" * 100_000 + "\x00Boom"})
    assert reply.status_code == 200 and reply.json()["status"] == "failed"
    run = client.get(f"/api/runs/{run_id}").json()
    assert len(run["error"]) == 16_000 and run["traceback_tail"].endswith("\ufffdBoom")


def test_a_prompt_key_no_database_can_hold_is_not_found(client: TestClient) -> None:
    """Found by the page fuzzer: a NUL in the prompt key of the URL reached PostgreSQL
    (which refuses it in a comparison) and answered 500."""
    run_id, _ = running_run(client)
    for key in ("%00", "a%00b", "%ED%A0%80"):  # NUL, and the UTF-8 bytes of a lone surrogate
        assert client.get(f"/runs/{run_id}/rollouts/prompt/{key}").status_code == 404, key
        assert client.get(f"/api/runs/{run_id}/rollouts/prompt/{key}").status_code == 404, key
