"""The experiments of ``shared/design/grpo-notes.md`` as ready-made run specs.

Data only, in one place: the JSON API (``GET /api/presets``) and the new-run form's picker both
read ``PRESETS``, and a test validates every spec here as a ``RunSpec``, so a preset can never
fill the form with something the launch would refuse. All run offline on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The real pretrained built-in: a random model writes no code, so the coding presets need it.
_MODEL = "builtin:smollm2-135m-instruct"
_CODE_COMPLETION = 160  # tokens: room for one short function in a fenced block


@dataclass(frozen=True)
class Preset:
    """A named spec (the fields a ``RunSpec`` takes) and, for a sweep, the group sizes to try."""

    name: str
    label: str
    description: str
    spec: dict[str, Any]
    sweep: dict[str, list[int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "description": self.description,
                "spec": self.spec, "sweep": self.sweep}


def _unit_tests(weight: float) -> dict[str, Any]:
    return {"name": "unit_tests", "weight": weight, "params": {"partial": True}}


def _unit_tests_run(name: str, num_generations: int) -> dict[str, Any]:
    """The second experiment's spec (a fresh copy); the sweep runs it at each group size."""
    return {"name": name, "model": _MODEL, "dataset": "builtin:easy-python",
            "eval_split": "test", "rewards": [_unit_tests(1.0)],
            "num_generations": num_generations, "max_steps": 30,
            "max_completion_length": _CODE_COMPLETION, "temperature": 0.9}


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset(
        "length-20", "Length 20",
        "The first experiment: learn to answer in about 20 characters (length_target). "
        "Trains visibly in a few minutes on CPU.",
        {"name": "length-20", "model": _MODEL, "dataset": "builtin:short-prompts",
         "rewards": [{"name": "length_target", "weight": 1.0, "params": {"target": 20}}],
         "num_generations": 4, "max_steps": 20, "max_completion_length": 32},
    ),
    Preset(
        "unit-tests", "Unit tests on easy-python",
        "The second experiment: write one Python function, rewarded by the share of its unit "
        "tests that pass in the sandbox; held-out problems evaluated on the test split.",
        _unit_tests_run("unit-tests-easy-python", 8),
    ),
    Preset(
        "reward-hacking", "Reward hacking demo",
        "The third experiment: train on a proxy that can be gamed (exactly one fenced code "
        "block, whatever it holds) while the unit tests, at weight 0, only watch: the true "
        "objective, drawn against the training reward on one chart. Hacking shows as the "
        "training reward rising while the objective stays flat or falls, and is flagged as "
        "reward_hacking. (On SmolLM2-135M over these 40 CPU steps both rose together: the "
        "proxy taught the format the tests also need; longer runs are where it can diverge.)",
        {"name": "reward-hacking-demo", "model": _MODEL, "dataset": "builtin:easy-python",
         "rewards": [{"name": "code_block_count", "weight": 1.0, "params": {"count": 1}},
                     _unit_tests(0.0)],
         "num_generations": 8, "max_steps": 40, "max_completion_length": _CODE_COMPLETION,
         "learning_rate": 2e-5},
    ),
    Preset(
        "group-size-sweep", "Group size sweep",
        "The second experiment across group sizes 2, 8 and 16: the same unit-tests run once per "
        "group size (the form fills the first; POST /api/sweeps launches all three).",
        _unit_tests_run("group-size-sweep", 2),
        sweep={"num_generations": [2, 8, 16]},
    ),
]}
