"""The launch form names every error at its field, in the label's words, and keeps all of them:
a rule across fields (batch size vs group size) is reported even when another field is wrong."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.launch.form import validate_form
from tests.app.conftest import html, one

BASE = {"name": "f", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "reward_0_name": "length_target", "reward_0_weight": "1", "reward_0_params": "target=20",
        "num_generations": "4", "max_steps": "3"}


def test_batch_size_error_is_at_its_field_with_another_error() -> None:
    spec, errors = validate_form({**BASE, "per_device_train_batch_size": "5", "max_steps": "0"})
    assert spec is None
    assert set(errors) == {"per_device_train_batch_size", "max_steps"}
    assert "multiple of the group size (4)" in errors["per_device_train_batch_size"]
    assert "per_device_train_batch_size" not in errors["per_device_train_batch_size"]


def test_batch_size_alone_and_eval_steps_are_at_their_fields() -> None:
    _, errors = validate_form({**BASE, "per_device_train_batch_size": "6", "eval_steps": "5"})
    assert set(errors) == {"per_device_train_batch_size", "eval_steps"}  # no '_form' banner
    assert "Eval split" in errors["eval_steps"]
    spec, errors = validate_form({**BASE, "per_device_train_batch_size": "8"})
    assert spec is not None and errors == {}


def test_reward_row_errors_land_on_the_row_typed_in() -> None:
    form = {**BASE, "reward_0_name": "", "reward_1_name": "length_target", "reward_1_weight": "NaN",
            "reward_2_name": "no_such_reward"}
    _, errors = validate_form(form)
    assert "finite" in errors["reward_1_weight"]
    assert errors["reward_2_name"].startswith("unknown reward function")
    _, errors = validate_form({**BASE, "reward_0_params": "target"})
    assert "not key=value" in errors["reward_0_params"]


def test_page_marks_each_field_lists_them_and_keeps_values(client: TestClient) -> None:
    page = client.post("/runs/new", data={**BASE, "per_device_train_batch_size": "5",
                                           "max_steps": "0", "name": "kept <name>"})
    assert page.status_code == 422
    batch = one(page.text, "#f-per_device_train_batch_size")
    assert batch["aria-invalid"] == "true" and batch["value"] == "5"
    assert "multiple of the group size" in one(page.text, f"#{batch['aria-describedby']}").text
    assert one(page.text, "label[for=f-per_device_train_batch_size]").text == "Batch size"
    links = [(a["href"], a.text) for a in html(page.text).select("#form-errors li a")]
    assert links == [("#f-per_device_train_batch_size", "Batch size"), ("#f-max_steps", "max_steps")]
    assert one(page.text, "#f-name")["value"] == "kept <name>"


def test_every_input_of_the_form_has_a_label(client: TestClient) -> None:
    page = html(client.get("/runs/new").text)
    labelled = {label["for"] for label in page.select("label[for]")}
    for control in page.select("#run-form input, #run-form select, #run-form textarea"):
        inside_label = control.find_parent("label") is not None
        assert inside_label or control.get("id") in labelled, control


def test_import_error_is_at_the_file_field(client: TestClient) -> None:
    page = client.post("/runs/import", data={"name": "kept"},
                       files={"log": ("x.json", b'{"not": "a log"}', "application/json")})
    assert page.status_code == 422
    log = one(page.text, "#f-log")
    assert log["aria-invalid"] == "true"
    assert one(page.text, f"#{log['aria-describedby']}").text.strip()
    assert one(page.text, "#f-import-name")["value"] == "kept"


def test_alert_settings_errors_are_at_the_textarea(client: TestClient) -> None:
    page = client.post("/settings/alerts", data={"urls": "not a url\njson://ok.example/x"})
    assert page.status_code == 422
    box = one(page.text, "#f-urls")
    assert box["aria-invalid"] == "true" and "not a url" in box.text  # kept as typed
    assert "line 1" in one(page.text, f"#{box['aria-describedby']}").text
