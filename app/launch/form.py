"""Turn the browser form into a RunSpec, and validation errors into per-field messages."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.alerts.rules import split_urls
from grpodeck.contract.alerts import masked
from grpodeck.contract.spec import ALL_LINEAR, RunSpec, batch_problems, clip_problem

REWARD_ROWS = 3
MAX_REWARD_ROWS = 16  # RunSpec.rewards max_length: a cloned spec may hold more than 3
NUMBER_FIELDS = ("num_generations", "per_device_train_batch_size", "max_steps", "learning_rate",
                 "beta", "epsilon", "max_completion_length", "temperature", "logging_steps",
                 "eval_steps", "seed", "rollout_every", "rollout_groups", "max_prompt_length",
                 "epsilon_high", "num_iterations", "top_p", "top_k", "gradient_accumulation_steps",
                 "max_grad_norm", "warmup_ratio", "save_steps", "lora_r", "lora_alpha",
                 "lora_dropout", "num_processes", "vllm_gpu_memory_utilization")
TEXT_FIELDS = ("name", "model", "dataset", "dataset_config", "train_split", "eval_split",
               "scale_rewards", "loss_type", "lr_scheduler_type", "distributed", "mixed_precision",
               "vllm_mode")
BOOL_FIELDS = ("stop_on_critical", "mask_truncated_completions", "use_vllm", "use_peft")


def parse_params(text: str) -> dict[str, str]:
    """'target=20, tag=answer' -> {'target': '20', 'tag': 'answer'} (types checked by the spec)."""
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"parameter {part!r} is not key=value")
        params[key.strip()] = value.strip()
    return params


# The words each field's label shows; errors are listed under these, never the internal names.
REWARD_LABELS = {f"reward_{i}_{part}": f"Reward {i + 1} {words}" for i in range(MAX_REWARD_ROWS)
                 for part, words in (("name", "function"), ("weight", "weight"),
                                     ("params", "parameters"))}
LABELS = {  # in the form's order: the error list above the form follows it
    "name": "Run name", "model": "Model", "dataset": "Dataset", **REWARD_LABELS,
    "num_generations": "num_generations (group size)",
    # the folded sections (app/launch/sections.py): Training
    "per_device_train_batch_size": "Batch size", "max_steps": "max_steps",
    "learning_rate": "learning_rate", "beta": "beta (KL coefficient)", "epsilon": "epsilon (clip)",
    "scale_rewards": "scale_rewards", "logging_steps": "logging_steps", "seed": "seed",
    "train_split": "Train split", "dataset_config": "Dataset configuration",
    # Generation, Evaluation
    "max_completion_length": "max_completion_length (tokens)",
    "max_prompt_length": "max_prompt_length (tokens)", "temperature": "temperature",
    "eval_split": "Eval split", "eval_steps": "Eval every N steps",
    # Monitoring and alerts
    "rollout_every": "Capture rollouts every N logging steps",
    "rollout_groups": "Groups kept per captured step", "alert_urls": "Alert this run also to",
    "alert_min_severity": "Alert from severity", "alert_ignore": "Never alert for",
    # Advanced
    "epsilon_high": "epsilon_high (upper clip)", "loss_type": "loss_type",
    "num_iterations": "num_iterations (updates per batch)", "top_p": "top_p", "top_k": "top_k",
    "mask_truncated_completions": "mask_truncated_completions",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "max_grad_norm": "max_grad_norm", "warmup_ratio": "warmup_ratio",
    "lr_scheduler_type": "lr_scheduler_type", "save_steps": "save_steps (checkpoints)",
    "use_vllm": "use_vllm", "vllm_mode": "vllm_mode",
    "vllm_gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "num_processes": "num_processes (devices)", "distributed": "distributed",
    "mixed_precision": "mixed_precision", "use_peft": "use_peft (LoRA)", "lora_r": "lora_r (rank)",
    "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout",
    "lora_target_modules": "lora_target_modules",
    # the action bar
    "smoke_steps": "Smoke test steps",
}


def parse_modules(text: str) -> list[str] | str | None:
    """'q_proj, v_proj' -> ['q_proj', 'v_proj']; 'all-linear' stays a string; empty -> None
    (peft's default for the model). The names themselves are checked by the spec."""
    names = [n for n in text.replace(",", " ").split() if n]
    if names == [ALL_LINEAR]:
        return ALL_LINEAR
    return names or None


def modules_text(value: list[str] | str | None) -> str:
    """The inverse of ``parse_modules``, for a stored spec shown in the form."""
    return ", ".join(value) if isinstance(value, list) else (value or "")


def filled_reward_rows(form: dict[str, str]) -> list[int]:
    """The form rows that became ``rewards`` entries, in order: rewards[k] is row rows[k]."""
    rows = []
    for i in range(MAX_REWARD_ROWS):
        if not (form.get(f"reward_{i}_name") or "").strip():
            continue
        try:
            parse_params(form.get(f"reward_{i}_params") or "")
        except ValueError:
            continue
        rows.append(i)
    return rows


def form_to_data(form: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Raw form fields -> spec data; empty optional fields fall back to the spec's defaults."""
    data: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key in TEXT_FIELDS + NUMBER_FIELDS:
        value = (form.get(key) or "").strip()
        if value:
            data[key] = value
    for key in BOOL_FIELDS:
        data[key] = form.get(key) in ("on", "true", "1")
    modules = parse_modules(form.get("lora_target_modules") or "")
    if modules is not None:
        data["lora_target_modules"] = modules
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
            errors[f"reward_{i}_params"] = str(exc)
            continue
        rewards.append({"name": name, "weight": (form.get(f"reward_{i}_weight") or "1").strip(),
                        "params": params})
    if not rewards and not errors:
        errors["reward_0_name"] = "choose at least one reward function"
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
    values["alert_urls"] = " ".join(masked(u) for u in alerts.get("urls") or [])
    values["alert_min_severity"] = alerts.get("min_severity") or "warning"
    values["alert_ignore"] = ", ".join(alerts.get("ignore") or [])
    for key in BOOL_FIELDS:
        values[key] = bool(spec.get(key))
    values["lora_target_modules"] = modules_text(spec.get("lora_target_modules"))
    return {k: ("" if v is None else v) for k, v in values.items()}


def reward_row_count(values: dict[str, Any]) -> int:
    """Enough rows for every reward the values hold, and at least the usual three."""
    used = [i for i in range(MAX_REWARD_ROWS) if values.get(f"reward_{i}_name")]
    return max(REWARD_ROWS, (used[-1] + 2) if used else 0)


def _reward_field(loc: tuple[Any, ...], message: str, rows: list[int]) -> str:
    """rewards.1.weight -> reward_<row>_weight: the row the person typed it in."""
    if len(loc) < 2 or not isinstance(loc[1], int) or loc[1] >= len(rows):
        return "reward_0_name"
    row = rows[loc[1]]
    part = str(loc[2]) if len(loc) > 2 else ""
    if part == "weight":
        return f"reward_{row}_weight"
    if part == "name" or message.startswith("unknown reward function"):
        return f"reward_{row}_name"
    return f"reward_{row}_params"


# pydantic's error types in the words a person filling the form reads ("Input should be
# greater than or equal to 2" -> "must be at least 2"); {name} is the error's ctx value.
PLAIN_WORDS = {
    "int_parsing": "must be a whole number, e.g. 8",
    "int_from_float": "must be a whole number, e.g. 8",
    "int_type": "must be a whole number, e.g. 8",
    "float_parsing": "must be a number, e.g. 0.5 or 1e-6",
    "float_type": "must be a number, e.g. 0.5 or 1e-6",
    "finite_number": "must be a finite number (not inf or nan)",
    "bool_parsing": "must be on or off",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "string_too_long": "is too long: at most {max_length} characters",
    "string_too_short": "must not be empty",
    "too_long": "has too many entries: at most {max_length}",
    "too_short": "needs at least {min_length}",
    "missing": "is required",
    "literal_error": "must be {expected}",
    "enum": "must be {expected}",
    "string_pattern_mismatch": "holds characters that are not allowed here",
    "string_type": "must be text",
}


def plain_message(err: Any) -> str:
    """One pydantic error as a plain sentence; our own validators' messages are already."""
    template = PLAIN_WORDS.get(err["type"])
    if template is None:
        return str(err["msg"]).removeprefix("Value error, ")
    try:
        return template.format(**(err.get("ctx") or {}))
    except (KeyError, IndexError):
        return str(err["msg"]).removeprefix("Value error, ")


def field_errors(exc: ValidationError, rows: list[int] | None = None) -> dict[str, str]:
    """Map pydantic errors to the form field they belong to ('_form' when no single field)."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = plain_message(err)
        field = str(loc[0]) if loc else "_form"
        if field == "rewards":
            field = _reward_field(loc, message, rows if rows is not None else [])
        if field == "alerts":  # alerts.urls -> alert_urls, the form's field names
            field = {"urls": "alert_urls", "min_severity": "alert_min_severity",
                     "ignore": "alert_ignore"}.get(str(loc[1]) if len(loc) > 1 else "",
                                                   "alert_urls")
        errors.setdefault(field, message)
    return errors


def _number(data: dict[str, Any], key: str) -> int | None:
    """The field as an int, its spec default when empty, None when it is not a whole number."""
    raw = data.get(key, RunSpec.model_fields[key].default)
    try:
        return None if raw is None else int(str(raw))
    except ValueError:
        return None


def cross_field_errors(data: dict[str, Any]) -> dict[str, str]:
    """The rules across fields, checked even when another field is invalid (pydantic skips
    its model validators then, and the person would fix one error only to meet the next)."""
    groups = _number(data, "num_generations")
    batch = _number(data, "per_device_train_batch_size")
    if groups is None or groups < 1 or (batch is None and data.get("per_device_train_batch_size")):
        groups, batch = None, None  # the field's own error says what is wrong with it
    errors: dict[str, str] = {}
    for field, _ in batch_problems(batch, groups or 1, _number(data, "eval_steps"),
                                   data.get("eval_split")):
        if field == "per_device_train_batch_size" and groups:
            errors[field] = (f"must be a multiple of the group size ({groups}): each step scores "
                             f"whole groups; e.g. {groups * max(1, round((batch or 0) / groups))}")
        elif field == "eval_steps":
            errors[field] = "needs an Eval split (or leave this empty for no evaluation)"
    return {**errors, **_clip_errors(data)}


def _clip_errors(data: dict[str, Any]) -> dict[str, str]:
    """epsilon_high below epsilon, shown at epsilon_high (both parsed; else their own errors)."""
    try:
        low = float(data.get("epsilon", RunSpec.model_fields["epsilon"].default))
        high = float(data["epsilon_high"]) if data.get("epsilon_high") else None
    except ValueError:
        return {}
    problem = clip_problem(low, high, str(data.get("loss_type") or "dapo"))
    return {"epsilon_high": problem} if problem else {}


def validate_form(form: dict[str, str]) -> tuple[RunSpec | None, dict[str, str]]:
    """The spec, or every error at its field: per field, across fields, and the reward rows."""
    data, errors = form_to_data(form)
    cross = cross_field_errors(data)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        found = field_errors(exc, filled_reward_rows(form))
        if cross:  # the model validators' messages, now shown at each field
            found.pop("_form", None)
        return None, {**found, **cross, **errors}
    return (None, errors) if errors else (spec, {})


def error_summary(errors: dict[str, str]) -> list[tuple[str, str, str]]:
    """(field id, label, message) in the form's order, for the list above the form."""
    order = list(LABELS)
    fields = sorted((f for f in errors if f != "_form"),
                    key=lambda f: order.index(f) if f in order else len(order))
    return [(f, LABELS.get(f, f), errors[f]) for f in fields]
