"""The new-run form's folded sections (issue 56).

The form showed every field at once (1,937 px at 1440x900): the few every run needs (preset,
model, dataset, rewards, group size) stay in the first screen, and the rest fold into native
``<details>`` sections. A folded field must never hide an error, so a section opens by itself
when a field inside has one; and it must never hide a choice someone else made (a preset, a
clone, a fix), so its summary names the values that differ from the spec's defaults.

Which field lives in which section is declared here once; ``tests/app/test_form_sections.py``
checks that templates/runs/new.html puts each field inside its section's ``<details>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.launch.form import BOOL_FIELDS, MAX_REWARD_ROWS, spec_to_form
from grpodeck.contract.spec import RunSpec

SHOWN_CHANGES = 4  # a summary names this many changed values, then "and N more"
VALUE_CHARS = 24  # a long value (alert URLs, module lists) is cut in the summary


@dataclass(frozen=True)
class Section:
    """One folded part of the form: its ``<details>`` id, its title and its fields."""

    id: str
    title: str
    fields: tuple[str, ...]


ESSENTIALS = ("name", "model", "dataset", "num_generations",
              *(f"reward_{i}_{part}" for i in range(MAX_REWARD_ROWS)
                for part in ("name", "weight", "params")))
SECTIONS = (
    Section("training", "Training", (
        "per_device_train_batch_size", "max_steps", "learning_rate", "beta", "epsilon",
        "scale_rewards", "logging_steps", "seed", "train_split", "dataset_config")),
    Section("generation", "Generation", (
        "max_completion_length", "max_prompt_length", "temperature")),
    Section("evaluation", "Evaluation", ("eval_split", "eval_steps")),
    Section("monitoring", "Monitoring and alerts", (
        "rollout_every", "rollout_groups", "alert_urls", "alert_min_severity", "alert_ignore",
        "stop_on_critical")),
    Section("advanced", "Advanced: TRL GRPOConfig, vLLM, devices, LoRA", (
        "epsilon_high", "loss_type", "num_iterations", "top_p", "top_k",
        "mask_truncated_completions", "gradient_accumulation_steps", "max_grad_norm",
        "warmup_ratio", "lr_scheduler_type", "save_steps", "use_vllm", "vllm_mode",
        "vllm_gpu_memory_utilization", "num_processes", "distributed", "mixed_precision",
        "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")),
)


@dataclass(frozen=True)
class SectionState:
    """How a section shows: open or folded, and the words after its title."""

    id: str
    title: str
    open: bool
    errors: int
    changed: tuple[str, ...]
    note: str = ""

    @property
    def text(self) -> str:
        """'1 field to fix', or the values changed from the defaults, or 'defaults'."""
        if self.errors:
            return f"{self.errors} field{'' if self.errors == 1 else 's'} to fix"
        parts = list(self.changed[:SHOWN_CHANGES])
        if len(self.changed) > SHOWN_CHANGES:
            parts.append(f"and {len(self.changed) - SHOWN_CHANGES} more")
        said = f"changed: {', '.join(parts)}" if parts else "defaults"
        return f"{said}; {self.note}" if self.note else said


def _defaults() -> dict[str, Any]:
    return spec_to_form(RunSpec().model_dump(mode="json"))


def _shown(value: Any) -> str:
    """A value as a summary shows it: on/off for a box, '(empty)', long text cut."""
    if value is True or value is False:
        return "on" if value else "off"
    text = " ".join(str(value).split()) or "(empty)"
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def _value(field: str, values: dict[str, Any]) -> Any:
    """The form's value of ``field``; a box as True/False (a browser sends "on" or nothing)."""
    if field in BOOL_FIELDS:
        return values.get(field) in (True, "on", "true", "1")
    return values.get(field, "")


def _same(value: Any, default: Any) -> bool:
    """Whether the form's value is the default: a box by its state, a number by its value
    ("1" is 1.0), anything else by its text."""
    if isinstance(value, bool):
        return value == bool(default)
    a, b = str(value if value is not None else "").strip(), str(default).strip()
    try:
        return a == b or float(a) == float(b)
    except ValueError:
        return False


def _changed(section: Section, values: dict[str, Any], defaults: dict[str, Any]
             ) -> tuple[str, ...]:
    """'max_steps 40' for each field whose value differs from the spec's default."""
    return tuple(f"{field} {_shown(_value(field, values))}" for field in section.fields
                 if not _same(_value(field, values), defaults.get(field, "")))


def _note(section: Section, values: dict[str, Any]) -> str:
    """What a folded section must still say: a clone's withheld alert destinations."""
    if section.id == "monitoring" and values.get("alerts_withheld"):
        return f"run {values['alerts_withheld']}'s alert destinations were not copied"
    return ""


def section_states(values: dict[str, Any], errors: dict[str, str]) -> dict[str, SectionState]:
    """Each section by id: open when a field inside has an error, with its changed values and
    notes for the summary."""
    defaults = _defaults()
    states = {}
    for section in SECTIONS:
        count = sum(1 for field in section.fields if field in errors)
        states[section.id] = SectionState(section.id, section.title, bool(count), count,
                                          _changed(section, values, defaults),
                                          _note(section, values))
    return states
