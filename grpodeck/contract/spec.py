"""The run spec: what a person asks for when launching a GRPO run.

One pydantic model validates the browser form, the JSON API and spec files alike, and is the
payload the worker receives. It reads no disk and no settings: local model and dataset names are
checked by their letters here, and against the files by the worker that reads them. Field names follow TRL's ``GRPOConfig`` where TRL has one, so a
spec reads like the trainer call it becomes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    field_validator,
    model_validator,
)

from grpodeck.contract.alerts import AlertRules
from grpodeck.contract.catalog import (
    BUILTIN_DATASETS,
    BUILTIN_MODELS,
    DEFAULT_DATASET,
    DEFAULT_MODEL,
    REWARDS,
    OutsideDirectory,
    coerce_params,
    is_hub_id,
    is_local_dataset,
    is_local_model,
    local_reference,
    outside_message,
)
from grpodeck.contract.fields import Text, storable
from grpodeck.contract.limits import MAX_BATCH, MAX_PATH, MAX_SEED, MAX_STEPS, MAX_TOKENS

# TRL 1.16's loss formulations, and the schedulers that need no extra arguments.
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
LOSS_TYPES: tuple[str, ...] = LossType.__args__  # type: ignore[attr-defined]
SchedulerType = Literal["linear", "cosine", "constant", "constant_with_warmup", "polynomial",
                        "inverse_sqrt"]
SCHEDULERS: tuple[str, ...] = SchedulerType.__args__  # type: ignore[attr-defined]
# One run on many devices (issue 26): how accelerate shares the model across the processes,
# the precision it trains in ("auto": bf16 where the GPU has it, else fp16; fp32 on a CPU), and
# where vLLM generates (inside each training process, or a separate ``trl vllm-serve``).
Distributed = Literal["ddp", "deepspeed_zero2", "deepspeed_zero3", "fsdp"]
DISTRIBUTED: tuple[str, ...] = Distributed.__args__  # type: ignore[attr-defined]
MixedPrecision = Literal["auto", "no", "bf16", "fp16"]
MIXED_PRECISIONS: tuple[str, ...] = MixedPrecision.__args__  # type: ignore[attr-defined]
VllmMode = Literal["colocate", "server"]
VLLM_MODES: tuple[str, ...] = VllmMode.__args__  # type: ignore[attr-defined]
MAX_PROCESSES = 64

# LoRA target modules: names (matched by peft against the ends of the model's module names, as
# q_proj matches model.layers.0.self_attn.q_proj), or peft's "all-linear". No regex: peft reads a
# single string other than "all-linear" as one, and a person's typo should not match everything.
ALL_LINEAR = "all-linear"
MAX_TARGET_MODULES = 32
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}")

# Floats are finite everywhere (``allow_inf_nan=False``): a NaN weight or learning rate trains
# nothing and loses the run. Upper bounds: ``limits``.


# The checks live in plain functions (the validators only call them) so they can be tested,
# and mutated by `make mutation`, without pydantic's decorators in the way.

def reward_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    reward = REWARDS.get(name)
    if reward is None:
        raise ValueError(f"unknown reward function {name!r}; known: {', '.join(REWARDS)}")
    params = coerce_params(reward, params)
    for value in params.values():
        if isinstance(value, str):
            storable(value)
    return params


def run_name(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("the run needs a name")
    return v


def _reference(v: str, kind: str, builtins: dict[str, str], is_local) -> str | None:  # type: ignore[no-untyped-def]
    """A built-in, a local name confined to its directory, or a hub id; None if none of them.
    Local references are checked by their letters only and refused in the same words whether
    the path exists or not: whether it exists is for the worker (bug 4)."""
    if v.startswith("builtin:"):
        if v not in builtins:
            raise ValueError(f"unknown built-in {kind}; known: {', '.join(builtins)}")
        return v
    if is_local(v):
        return local_reference(v, kind)
    return v if is_hub_id(v) else None


def model_reference(v: str) -> str:
    v = v.strip()
    found = _reference(v, "model", BUILTIN_MODELS, is_local_model)
    if found is None:
        raise ValueError("unknown model: use a built-in, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
                         "or a directory (with config.json) in the models directory")
    return found


# Dataset references by an allow-list of characters, not by spotting bad ones: a hub id is
# ``org/name``; a local file is a name in the datasets directory (sub-folders allowed), ending
# .json/.jsonl. Every name starts with a letter or digit, so no ``..``, ``~``, ``/``, ``%2f``,
# ``file:`` or other scheme gets through to a worker (issue 22).
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
HUB_DATASET = re.compile(rf"^{_NAME}/{_NAME}$")
DATASET_FILE = re.compile(rf"^(?:{_NAME}/)*{_NAME}\.jsonl?$")
UNKNOWN_DATASET = ("unknown dataset: use a built-in (builtin:...), a hub id like org/name, or an "
                   "uploaded .jsonl file (letters, digits, '.', '_' and '-')")


def dataset_reference(v: str) -> str:
    v = v.strip()
    found = _reference(v, "dataset", BUILTIN_DATASETS, is_local_dataset)
    if found is None:
        raise ValueError(UNKNOWN_DATASET)
    if found.startswith("builtin:"):
        return found
    if is_local_dataset(found):
        if not DATASET_FILE.match(found):
            raise OutsideDirectory(outside_message("dataset"))
        return found
    if not HUB_DATASET.match(found):
        raise ValueError(UNKNOWN_DATASET)
    return found


# With an eval split but no eval_steps, evaluate about this many times per run.
DEFAULT_EVALS_PER_RUN = 4


def eval_every(eval_split: object, eval_steps: object, max_steps: object) -> int | None:
    """Steps between evaluations as the worker trains (None: no evaluation); the web app counts
    the evaluations still ahead in a run's ETA with the same rule."""
    if not eval_split:
        return None
    if isinstance(eval_steps, int) and eval_steps > 0:
        return eval_steps
    return max(1, (max_steps if isinstance(max_steps, int) else 0) // DEFAULT_EVALS_PER_RUN)


def batch_problems(batch_size: int | None, num_generations: int, eval_steps: int | None,
                   eval_split: str | None) -> list[tuple[str, str]]:
    """(field, message) for each rule across fields that is broken: a form shows each at the
    field it names, the API joins them."""
    problems = []
    if (batch_size or num_generations) % num_generations:
        problems.append(("per_device_train_batch_size",
                         ("per_device_train_batch_size must be a multiple of num_generations "
                          "(each step scores whole groups)")))
    if eval_steps and not eval_split:
        problems.append(("eval_steps", "eval_steps needs an eval_split"))
    return problems


def clip_problem(epsilon: float, epsilon_high: float | None, loss_type: str) -> str | None:
    """The upper clip bound below the lower one clips every improvement away (CISPO's bound is
    of another kind, so it is left alone)."""
    if epsilon_high is not None and loss_type != "cispo" and epsilon_high < epsilon:
        return (f"epsilon_high ({epsilon_high}) must be at least epsilon ({epsilon}): "
                "it is the upper clip bound")
    return None


def target_modules(v: object) -> list[str] | str | None:
    """Module names, in order, each once, or "all-linear" alone (in a list peft would read it as
    a module literally named so); empty = peft's default for the model type."""
    if v is None or v == ALL_LINEAR:
        return v  # type: ignore[return-value]
    if not isinstance(v, list) or not all(isinstance(name, str) for name in v):
        raise ValueError(f'lora_target_modules is a list of module names or "{ALL_LINEAR}"')
    if ALL_LINEAR in v:
        raise ValueError(f'"{ALL_LINEAR}" stands alone, not inside a list of module names')
    for name in v:
        if not MODULE_NAME.fullmatch(name):
            raise ValueError(f"{name[:70]!r} is not a module name: up to 64 letters, digits, _ "
                             "and . (no patterns), e.g. q_proj")
    names = list(dict.fromkeys(v))
    if len(names) > MAX_TARGET_MODULES:
        raise ValueError(f"at most {MAX_TARGET_MODULES} target modules")
    return names or None


TargetModules = Annotated[
    list[str] | str | None,
    PlainValidator(target_modules, json_schema_input_type=list[str] | Literal["all-linear"] | None),
]


def device_problems(num_processes: int, distributed: str) -> list[tuple[str, str]]:
    """(field, message) for device settings that contradict each other whatever the worker:
    sharding a model across one process shards nothing (DeepSpeed/FSDP need two or more)."""
    if distributed != "ddp" and num_processes < 2:
        return [("distributed", (f"{distributed} shards the model across processes: it needs "
                                 "num_processes of 2 or more (use ddp for one process)"))]
    return []


def check_batch(batch_size: int | None, num_generations: int, eval_steps: int | None,
                eval_split: str | None) -> None:
    problems = batch_problems(batch_size, num_generations, eval_steps, eval_split)
    if problems:
        raise ValueError("; ".join(message for _, message in problems))


class RewardSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: Text(64)
    weight: float = Field(1.0, ge=-1_000, le=1_000,
                          description="TRL reward_weights entry; finite, |weight| <= 1000")
    params: dict[Text(64), Any] = Field(default_factory=dict, max_length=16)

    @model_validator(mode="after")
    def _known_reward(self) -> RewardSpec:
        self.params = reward_params(self.name, self.params)
        return self


class RunSpec(BaseModel):
    """Everything needed to reproduce a run. Defaults run out of the box on CPU."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: Text(120, min_length=1) = "grpo-run"
    model: Text(MAX_PATH) = DEFAULT_MODEL
    dataset: Text(MAX_PATH) = DEFAULT_DATASET
    dataset_config: Text(200) | None = Field(None, description="hub dataset configuration name")
    train_split: Text(200) = "train"
    eval_split: Text(200) | None = None
    rewards: list[RewardSpec] = Field(
        default_factory=lambda: [RewardSpec(name="length_target", params={"target": 20})],
        min_length=1, max_length=16,
    )
    num_generations: int = Field(4, ge=2, le=64, description="group size G")
    per_device_train_batch_size: int | None = Field(
        None, ge=1, le=MAX_BATCH,
        description="completions per step; default one group (= num_generations)"
    )
    max_steps: int = Field(20, ge=1, le=MAX_STEPS)
    learning_rate: float = Field(1e-5, gt=0, le=1.0)
    beta: float = Field(0.04, ge=0, le=10, description="KL coefficient; 0 disables the reference "
                        "model; above ~1 the KL term outweighs any reward")
    epsilon: float = Field(0.2, gt=0, lt=1)
    max_prompt_length: int | None = Field(None, ge=1, le=MAX_TOKENS)
    max_completion_length: int = Field(32, ge=1, le=32_768)
    temperature: float = Field(1.0, gt=0, le=5)
    scale_rewards: Literal["group", "batch", "none"] = "group"
    logging_steps: int = Field(1, ge=1, le=MAX_STEPS)
    # Advanced: TRL 1.16's defaults, so a spec without them trains as before.
    epsilon_high: float | None = Field(
        None, gt=0, le=10, description="upper clip bound (DAPO: 0.28); empty = epsilon")
    loss_type: LossType = "dapo"
    num_iterations: int = Field(1, ge=1, le=16, description="policy updates per generated batch (mu)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling; 1 keeps every token")
    top_k: int = Field(0, ge=0, le=100_000, description="0 disables top-k filtering")
    mask_truncated_completions: bool = False
    gradient_accumulation_steps: int = Field(1, ge=1, le=256)
    max_grad_norm: float = Field(1.0, ge=0, le=1_000, description="0 disables gradient clipping")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="share of max_steps warming up")
    lr_scheduler_type: SchedulerType = "linear"
    save_steps: int | None = Field(None, ge=1, le=MAX_STEPS,
                                   description="checkpoint every N steps; empty = no checkpoints")
    use_vllm: bool = Field(False, description="generate with vLLM: needs a CUDA GPU and vllm on "
                           "the worker; a worker without them fails the run saying so")
    vllm_mode: VllmMode = Field("colocate", description="colocate: vLLM inside each training "
                                "process; server: a separate `trl vllm-serve` on the worker")
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0, le=0.95, description="share of each GPU's memory vLLM may take (colocate)")
    # Devices (issue 26): num_processes > 1 starts the training under `accelerate launch`.
    num_processes: int = Field(1, ge=1, le=MAX_PROCESSES,
                               description="training processes (one per GPU; on a CPU worker, "
                               "CPU processes talking over gloo)")
    distributed: Distributed = Field("ddp", description="how the processes share the model: "
                                     "ddp copies it; DeepSpeed ZeRO-2/3 and FSDP shard it (GPU)")
    mixed_precision: MixedPrecision = Field(
        "auto", description="auto: bf16 where the GPU supports it, else fp16; none on a CPU")
    # LoRA (peft), by TRL's ModelConfig names and defaults: off trains every weight.
    use_peft: bool = Field(False, description="train a LoRA adapter instead of every weight; "
                           "checkpoints then hold the adapter only")
    lora_r: int = Field(16, ge=1, le=1024, description="LoRA rank")
    lora_alpha: int = Field(32, ge=1, le=8192, description="LoRA scaling numerator (scale = "
                            "alpha / r)")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the adapter's input")
    lora_target_modules: TargetModules = Field(
        None,
        description='module names to adapt (e.g. ["q_proj", "v_proj"]) or "all-linear"; '
                    "empty = peft's default for the model type")
    eval_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    seed: int = Field(42, ge=0, le=MAX_SEED, description="below 2**32 (numpy's seed range)")
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
        return run_name(v)

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        return model_reference(v)

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str) -> str:
        return dataset_reference(v)

    @model_validator(mode="after")
    def _batch_holds_whole_groups(self) -> RunSpec:
        check_batch(self.per_device_train_batch_size, self.num_generations, self.eval_steps,
                    self.eval_split)
        problem = clip_problem(self.epsilon, self.epsilon_high, self.loss_type)
        if problem:
            raise ValueError(problem)
        problems = device_problems(self.num_processes, self.distributed)
        if problems:
            raise ValueError("; ".join(message for _, message in problems))
        return self

    @property
    def batch_size(self) -> int:
        return self.per_device_train_batch_size or self.num_generations
