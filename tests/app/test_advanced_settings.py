"""Advanced GRPOConfig settings: the form's Advanced section sends them into the spec, and
values out of range come back as 422s naming the field and the reason."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import one
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec


def test_form_sends_advanced_settings(client: TestClient) -> None:
    data = submitted(one(client.get("/runs/new").text, "#run-form"))
    data.update(epsilon_high="0.28", loss_type="bnpo", num_iterations="2", top_p="0.95",
                top_k="40", mask_truncated_completions="on", gradient_accumulation_steps="2",
                max_grad_norm="0.3", warmup_ratio="0.1", lr_scheduler_type="cosine",
                save_steps="10")
    launched = client.post("/runs/new", data=data, follow_redirects=False)
    assert launched.status_code == 303, launched.text
    spec = client.get(launched.headers["location"].replace("/runs/", "/api/runs/")).json()["spec"]
    assert {k: spec[k] for k in ("epsilon_high", "loss_type", "num_iterations", "top_p", "top_k",
                                 "mask_truncated_completions", "gradient_accumulation_steps",
                                 "max_grad_norm", "warmup_ratio", "lr_scheduler_type",
                                 "save_steps", "use_vllm")} == {
        "epsilon_high": 0.28, "loss_type": "bnpo", "num_iterations": 2, "top_p": 0.95,
        "top_k": 40, "mask_truncated_completions": True, "gradient_accumulation_steps": 2,
        "max_grad_norm": 0.3, "warmup_ratio": 0.1, "lr_scheduler_type": "cosine",
        "save_steps": 10, "use_vllm": False}


@pytest.mark.parametrize(("field", "value", "words"), [
    ("top_p", "1.5", "must be at most 1"),
    ("warmup_ratio", "1", "less than 1"),
    ("num_iterations", "0", "must be at least 1"),
    ("loss_type", "ppo", "'grpo'"),
    ("epsilon_high", "0.1", "must be at least epsilon"),
    ("lora_target_modules", "q_proj, self_attn.*", "'self_attn.*' is not a module name"),
    ("lora_target_modules", "all-linear, q_proj", '"all-linear" stands alone'),
    ("lora_r", "0", "must be at least 1"),
    ("lora_dropout", "1", "less than 1"),
])
def test_out_of_range_is_shown_at_the_field(client: TestClient, field: str, value: str,
                                            words: str) -> None:
    data = submitted(one(client.get("/runs/new").text, "#run-form"))
    data.update({"use_peft": "on", field: value})
    page = client.post("/runs/new", data=data)
    assert page.status_code == 422
    assert words in one(page.text, f"#e-{field}").get_text()
    assert one(page.text, f"#f-{field}")["aria-describedby"] == f"e-{field}"
    assert one(page.text, f'#form-errors a[href="#f-{field}"]')
    assert one(page.text, "#advanced").has_attr("open")


def test_api_refuses_out_of_range_with_a_reason(client: TestClient) -> None:
    reply = client.post("/api/runs", json=tiny_spec(epsilon=0.2, epsilon_high=0.1))
    assert reply.status_code == 422
    assert "epsilon_high (0.1) must be at least epsilon (0.2)" in reply.text
    reply = client.post("/api/runs", json=tiny_spec(lr_scheduler_type="reduce_lr_on_plateau"))
    assert reply.status_code == 422 and "lr_scheduler_type" in reply.text
