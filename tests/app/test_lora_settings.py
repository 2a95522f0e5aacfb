"""LoRA settings (use_peft, lora_*): checked by the spec, sent by the form's Advanced section
and the JSON API, shown again when a run is cloned, and refused at the field when wrong."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from grpodeck.contract.spec import RunSpec
from tests.app.conftest import one
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec

LORA_KEYS = ("use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")


def test_spec_defaults_are_trls_and_off() -> None:
    spec = RunSpec()
    assert {k: getattr(spec, k) for k in LORA_KEYS} == {
        "use_peft": False, "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
        "lora_target_modules": None}


def test_spec_target_modules() -> None:
    spec = RunSpec(use_peft=True, lora_target_modules=["q_proj", "v_proj", "q_proj"])
    assert spec.lora_target_modules == ["q_proj", "v_proj"]  # each once, in order
    assert RunSpec(lora_target_modules="all-linear").lora_target_modules == "all-linear"
    assert RunSpec(lora_target_modules=[]).lora_target_modules is None


@pytest.mark.parametrize(("value", "words"), [
    ("q_proj", 'a list of module names or "all-linear"'),
    (["all-linear"], '"all-linear" stands alone'),
    (["q_proj", ".*"], "'.*' is not a module name"),
    (["q proj"], "'q proj' is not a module name"),
    (["x" * 65], "is not a module name: up to 64"),
    ([f"m{i}" for i in range(33)], "at most 32 target modules"),
    ([3], 'a list of module names or "all-linear"'),
])
def test_spec_refuses_bad_target_modules(value: object, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        RunSpec(lora_target_modules=value)


@pytest.mark.parametrize(("field", "value"), [("lora_r", 0), ("lora_r", 1025),
                                              ("lora_alpha", 0), ("lora_dropout", 1.0),
                                              ("lora_dropout", -0.1)])
def test_spec_bounds(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        RunSpec(**{field: value})


def test_form_round_trip(client: TestClient) -> None:
    """The Advanced section sends LoRA into the spec; "New run from this one" shows it again,
    and launching that unchanged gives the same settings."""
    data = submitted(one(client.get("/runs/new").text, "#run-form"))
    assert "use_peft" not in data and data["lora_r"] == "16" and data["lora_target_modules"] == ""
    data.update(use_peft="on", lora_r="8", lora_alpha="16", lora_dropout="0.1",
                lora_target_modules="q_proj, v_proj,k_proj")
    launched = client.post("/runs/new", data=data, follow_redirects=False)
    assert launched.status_code == 303, launched.text
    run_id = launched.headers["location"].rsplit("/", 1)[1]
    spec = client.get(f"/api/runs/{run_id}").json()["spec"]
    expected = {"use_peft": True, "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.1,
                "lora_target_modules": ["q_proj", "v_proj", "k_proj"]}
    assert {k: spec[k] for k in LORA_KEYS} == expected
    form = one(client.get(f"/runs/new?from={run_id}").text, "#run-form")
    assert one(str(form), "#f-use_peft").has_attr("checked")
    assert one(str(form), "#f-lora_target_modules")["value"] == "q_proj, v_proj, k_proj"
    again = client.post("/runs/new", data=submitted(form), follow_redirects=False)
    assert again.status_code == 303, again.text
    spec = client.get(again.headers["location"].replace("/runs/", "/api/runs/")).json()["spec"]
    assert {k: spec[k] for k in LORA_KEYS} == expected


def test_form_all_linear(client: TestClient) -> None:
    data = submitted(one(client.get("/runs/new").text, "#run-form"))
    data.update(use_peft="on", lora_target_modules=" all-linear ")
    launched = client.post("/runs/new", data=data, follow_redirects=False)
    assert launched.status_code == 303, launched.text
    spec = client.get(launched.headers["location"].replace("/runs/", "/api/runs/")).json()["spec"]
    assert spec["lora_target_modules"] == "all-linear"


def test_api_takes_lora_and_refuses_bad_modules_with_a_reason(client: TestClient) -> None:
    reply = client.post("/api/runs", json=tiny_spec(use_peft=True, lora_r=4,
                                                    lora_target_modules=["q_proj"]))
    assert reply.status_code == 201, reply.text
    spec = client.get(f"/api/runs/{reply.json()['id']}").json()["spec"]
    assert (spec["use_peft"], spec["lora_r"], spec["lora_target_modules"]) == (True, 4, ["q_proj"])
    reply = client.post("/api/runs", json=tiny_spec(use_peft=True,
                                                    lora_target_modules="q_proj|v_proj"))
    assert reply.status_code == 422
    detail = reply.json()["detail"]
    assert detail[0]["loc"][-1] == "lora_target_modules"
    assert 'a list of module names or \\"all-linear\\"' in reply.text
