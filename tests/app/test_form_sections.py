"""The new-run form's folded sections (issue 56), as the server renders them: every field sits
in the one section ``app/launch/sections.py`` declares for it (that declaration decides which
section an error opens), an error opens its section and no other, a summary names what a clone
changed from the defaults, and what only admins read (how to allow custom rewards, the alert
settings link in the navigation) stays theirs."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.launch.form import spec_to_form
from app.launch.sections import ESSENTIALS, SECTIONS, section_states
from grpodeck.contract.spec import RunSpec
from tests.app.conftest import html, one, queued_run
from tests.app.test_auth import login, make_user
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec

SHOWN_ONLY_WITH_A_GPU = {"use_vllm", "vllm_mode", "vllm_gpu_memory_utilization"}
BAD = {"training": ("max_steps", "0"), "generation": ("temperature", "-1"),
       "evaluation": ("eval_steps", "5"), "monitoring": ("rollout_groups", "-1"),
       "advanced": ("top_p", "1.5")}


def _names(tag: object) -> set[str]:
    return {f["name"] for f in tag.select("input[name], select[name]")  # type: ignore[attr-defined]
            if f.get("type") != "hidden"}


def test_each_field_sits_in_the_section_declared_for_it(client: TestClient) -> None:
    form = one(client.get("/runs/new").text, "#run-form")
    for section in SECTIONS:
        inside = _names(one(str(form), f"details.form-section#{section.id}"))
        assert inside <= set(section.fields), section.id
        assert set(section.fields) - inside <= SHOWN_ONLY_WITH_A_GPU, section.id
    for details in form.select("details.form-section"):
        details.decompose()
    assert _names(form) - {"smoke_steps"} <= set(ESSENTIALS)
    assert {"name", "model", "dataset", "num_generations", "reward_0_name"} <= _names(form)


def test_a_fresh_form_has_every_section_folded(client: TestClient) -> None:
    page = html(client.get("/runs/new").text)
    assert [d["id"] for d in page.select("details.form-section")] == [s.id for s in SECTIONS]
    assert page.select("details.form-section[open]") == []
    assert {s.get_text() for s in page.select(".section-state")} == {"defaults"}


@pytest.mark.parametrize("section", list(BAD))
def test_an_error_opens_its_section_and_no_other(client: TestClient, section: str) -> None:
    field, value = BAD[section]
    data = {**submitted(one(client.get("/runs/new").text, "#run-form")), field: value}
    page = client.post("/runs/new", data=data)
    assert page.status_code == 422
    opened = [d["id"] for d in html(page.text).select("details.form-section[open]")]
    assert opened == [section]
    assert one(page.text, f"#{section}-state").get_text() == "1 field to fix"
    assert one(page.text, f"#{section} #e-{field}")


def test_a_clone_names_what_differs_from_the_defaults(client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="c", max_steps=30, use_peft=True, lora_r=8))
    page = client.get(f"/runs/new?from={parent_id}").text
    assert "max_steps 30" in one(page, "#training-state").get_text()
    assert one(page, "#advanced-state").get_text() == "changed: use_peft on, lora_r 8"
    assert html(page).select("details.form-section[open]") == []


def test_a_summary_says_a_clones_alert_destinations_were_withheld() -> None:
    defaults = spec_to_form(RunSpec().model_dump(mode="json"))
    states = section_states({**defaults, "alert_urls": "", "alerts_withheld": 7}, {})
    assert states["monitoring"].text == "defaults; run 7's alert destinations were not copied"
    many = section_states({**defaults, "max_steps": "30", "learning_rate": "1", "beta": "0",
                           "seed": "1", "epsilon": "0.3", "logging_steps": "1.0"}, {})
    assert many["training"].text == ("changed: max_steps 30, learning_rate 1, beta 0, "
                                     "epsilon 0.3, and 1 more")  # logging_steps 1.0 is 1


def test_a_normal_account_gets_a_plain_line_about_custom_rewards(client: TestClient) -> None:
    make_user("someone@example.com")
    assert login(client, "someone@example.com").status_code == 303
    page = client.get("/runs/new").text
    line = one(page, "#custom-rewards-help").get_text()
    assert "tests.rewards.custom_reward:shout" in line  # what may be used, for everyone
    shown = line + one(page, "#custom-rewards").decode()  # the line and the choices offered
    assert "GRPODECK_CUSTOM_REWARDS" not in shown and "entry point" not in shown


def test_an_admin_reads_how_to_allow_custom_rewards(client: TestClient) -> None:
    make_user("admin@example.com", admin=True)
    assert login(client, "admin@example.com").status_code == 303
    page = client.get("/runs/new").text
    assert "GRPODECK_CUSTOM_REWARDS" in one(page, "#custom-rewards-help").get_text()
    assert "(GRPODECK_CUSTOM_REWARDS)" in one(page, "#custom-rewards").decode()  # the source


def test_the_alert_settings_link_is_in_the_navigation_for_admins_only(
        client: TestClient) -> None:
    """Development mode's one local user is the admin; a normal account never sees it."""
    assert one(client.get("/runs").text, "header nav a[href='/settings/alerts']")
    make_user("someone@example.com")
    make_user("admin@example.com", admin=True)
    assert login(client, "someone@example.com").status_code == 303
    assert html(client.get("/runs").text).select("header nav a[href='/settings/alerts']") == []
    assert login(client, "admin@example.com").status_code == 303
    link = one(client.get("/runs").text, "header nav a[href='/settings/alerts']")
    assert link.get_text() == "Alert settings"
