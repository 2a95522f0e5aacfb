"""The run spec: what a person asks for when launching a GRPO run.

One pydantic model validates the browser form, the JSON API and spec files alike, and is the
payload the worker receives. Field names follow TRL's ``GRPOConfig`` where TRL has one, so a
spec reads like the trainer call it becomes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.alerts.rules import AlertRules
from worker.catalog import BUILTIN_DATASETS, BUILTIN_MODELS, DEFAULT_DATASET, DEFAULT_MODEL
from worker.rewards.registry import REWARDS, coerce_params

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class RewardSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    weight: float = 1.0
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_reward(self) -> RewardSpec:
        reward = REWARDS.get(self.name)
        if reward is None:
            raise ValueError(f"unknown reward function {self.name!r}; known: {', '.join(REWARDS)}")
        self.params = coerce_params(reward, self.params)
        return self


class RunSpec(BaseModel):
    """Everything needed to reproduce a run. Defaults run out of the box on CPU."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("grpo-run", min_length=1, max_length=120)
    model: str = DEFAULT_MODEL
    dataset: str = DEFAULT_DATASET
    dataset_config: str | None = None
    train_split: str = "train"
    eval_split: str | None = None
    rewards: list[RewardSpec] = Field(
        default_factory=lambda: [RewardSpec(name="length_target", params={"target": 20})],
        min_length=1,
    )
    num_generations: int = Field(4, ge=2, le=64, description="group size G")
    per_device_train_batch_size: int | None = Field(
        None, ge=1, description="completions per step; default one group (= num_generations)"
    )
    max_steps: int = Field(20, ge=1, le=1_000_000)
    learning_rate: float = Field(1e-5, gt=0, le=1.0)
    beta: float = Field(0.04, ge=0, description="KL coefficient; 0 disables the reference model")
    epsilon: float = Field(0.2, gt=0, lt=1)
    max_prompt_length: int | None = Field(None, ge=1)
    max_completion_length: int = Field(32, ge=1, le=32_768)
    temperature: float = Field(1.0, gt=0, le=5)
    scale_rewards: Literal["group", "batch", "none"] = "group"
    logging_steps: int = Field(1, ge=1)
    eval_steps: int | None = Field(None, ge=1)
    seed: int = Field(42, ge=0)
    rollout_every: int = Field(
        1, ge=1, le=10_000, description="capture rollouts at every Nth logging step")
    rollout_groups: int = Field(
        4, ge=0, le=64, description="groups kept per captured step (0: capture none)")
    stop_on_critical: bool = False
    alerts: AlertRules = Field(default_factory=AlertRules,
                               description="who is told about this run's findings")

    @field_validator("name")
    @classmethod
    def _strip_name(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("the run needs a name")
        return v

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("builtin:"):
            if v not in BUILTIN_MODELS:
                raise ValueError(f"unknown built-in model; known: {', '.join(BUILTIN_MODELS)}")
            return v
        if Path(v).is_dir():
            if not (Path(v) / "config.json").exists():
                raise ValueError("local model directory has no config.json")
            return v
        if HUB_ID.match(v):
            return v
        raise ValueError("unknown model: use a built-in, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
                         "or a local directory with config.json")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("builtin:"):
            if v not in BUILTIN_DATASETS:
                raise ValueError(f"unknown built-in dataset; known: {', '.join(BUILTIN_DATASETS)}")
            return v
        if v.endswith((".jsonl", ".json")):
            if not Path(v).is_file():
                raise ValueError("dataset file not found")
            return v
        if HUB_ID.match(v):
            return v
        raise ValueError("unknown dataset: use a built-in, a hub id, or a .jsonl file")

    @model_validator(mode="after")
    def _batch_holds_whole_groups(self) -> RunSpec:
        batch = self.per_device_train_batch_size or self.num_generations
        if batch % self.num_generations:
            raise ValueError("per_device_train_batch_size must be a multiple of num_generations "
                             "(each step scores whole groups)")
        if self.eval_steps and not self.eval_split:
            raise ValueError("eval_steps needs an eval_split")
        return self

    @property
    def batch_size(self) -> int:
        return self.per_device_train_batch_size or self.num_generations
