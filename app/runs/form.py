"""Turn the browser form into a RunSpec, and validation errors into per-field messages."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.alerts.rules import split_urls
from app.runs.spec import RunSpec

REWARD_ROWS = 3
MAX_REWARD_ROWS = 16  # RunSpec.rewards max_length: a cloned spec may hold more than 3
NUMBER_FIELDS = ("num_generations", "per_device_train_batch_size", "max_steps", "learning_rate",
                 "beta", "epsilon", "max_completion_length", "temperature", "logging_steps",
                 "eval_steps", "seed", "rollout_every", "rollout_groups", "max_prompt_length")
TEXT_FIELDS = ("name", "model", "dataset", "dataset_config", "train_split", "eval_split",
               "scale_rewards")


def parse_params(text: str) -> dict[str, str]:
    """'target=20, tag=answer' -> {'target': '20', 'tag': 'answer'} (types checked by the spec)."""
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"parameter {part!r} is not key=value")
        params[key.strip()] = value.strip()
    return params


def form_to_data(form: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Raw form fields -> spec data; empty optional fields fall back to the spec's defaults."""
    data: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key in TEXT_FIELDS + NUMBER_FIELDS:
        value = (form.get(key) or "").strip()
        if value:
            data[key] = value
    data["stop_on_critical"] = form.get("stop_on_critical") in ("on", "true", "1")
    data["alerts"] = {"urls": split_urls(form.get("alert_urls")),
                      "min_severity": (form.get("alert_min_severity") or "warning").strip(),
                      "ignore": [c.strip() for c in (form.get("alert_ignore") or "").split(",")
                                 if c.strip()]}
    rewards = []
    for i in range(MAX_REWARD_ROWS):
        name = (form.get(f"reward_{i}_name") or "").strip()
        if not name:
            continue
        try:
            params = parse_params(form.get(f"reward_{i}_params") or "")
        except ValueError as exc:
            errors["rewards"] = str(exc)
            continue
        rewards.append({"name": name, "weight": (form.get(f"reward_{i}_weight") or "1").strip(),
                        "params": params})
    if not rewards and "rewards" not in errors:
        errors["rewards"] = "choose at least one reward function"
    data["rewards"] = rewards
    return data, errors


def spec_to_form(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored spec as the form's fields (the inverse of ``form_to_data``): what "New run from
    this one" fills in, so launching it unchanged yields the same spec."""
    values: dict[str, Any] = {k: spec.get(k) for k in TEXT_FIELDS + NUMBER_FIELDS}
    for i, reward in enumerate(spec.get("rewards") or []):
        values[f"reward_{i}_name"] = reward.get("name", "")
        values[f"reward_{i}_weight"] = reward.get("weight", 1.0)
        values[f"reward_{i}_params"] = ", ".join(
            f"{k}={v}" for k, v in (reward.get("params") or {}).items())
    alerts = spec.get("alerts") or {}
    values["alert_urls"] = " ".join(alerts.get("urls") or [])
    values["alert_min_severity"] = alerts.get("min_severity") or "warning"
    values["alert_ignore"] = ", ".join(alerts.get("ignore") or [])
    values["stop_on_critical"] = bool(spec.get("stop_on_critical"))
    return {k: ("" if v is None else v) for k, v in values.items()}


def reward_rows(values: dict[str, Any]) -> int:
    """Enough rows for every reward the values hold, and at least the usual three."""
    used = [i for i in range(MAX_REWARD_ROWS) if values.get(f"reward_{i}_name")]
    return max(REWARD_ROWS, (used[-1] + 2) if used else 0)


def field_errors(exc: ValidationError) -> dict[str, str]:
    """Map pydantic errors to the form field they belong to ('_form' when no single field)."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        loc = err["loc"]
        field = str(loc[0]) if loc else "_form"
        if field == "rewards" or field.startswith("reward"):
            field = "rewards"
        if field == "alerts":  # alerts.urls -> alert_urls, the form's field names
            field = {"urls": "alert_urls", "min_severity": "alert_min_severity",
                     "ignore": "alert_ignore"}.get(str(loc[1]) if len(loc) > 1 else "",
                                                   "alert_urls")
        message = err["msg"].removeprefix("Value error, ")
        errors.setdefault(field, message)
    return errors


def validate_form(form: dict[str, str]) -> tuple[RunSpec | None, dict[str, str]]:
    data, errors = form_to_data(form)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        return None, {**field_errors(exc), **errors}
    return (None, errors) if errors else (spec, {})
