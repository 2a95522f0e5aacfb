"""Map a ``RunSpec`` onto TRL 1.16's ``GRPOConfig``.

Spec field names follow GRPOConfig where one exists; this module is the single place that knows
the differences (``batch_size`` default, eval scheduling, reward weights, hardware precision) and
the settings a dashboard-driven run always wants (no checkpoints, no external loggers: metrics go
through ``MetricsReporter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.training.hardware import hardware_kwargs

if TYPE_CHECKING:
    from peft import LoraConfig
    from trl import GRPOConfig

    from grpodeck.contract.spec import RunSpec

def eval_kwargs(spec: RunSpec) -> dict[str, Any]:
    """Evaluation only happens with an eval split; the eval batch holds whole groups like training."""
    from grpodeck.contract.spec import eval_every

    steps = eval_every(spec.eval_split, spec.eval_steps, spec.max_steps)
    if steps is None:
        return {"eval_strategy": "no", "do_eval": False}
    return {"eval_strategy": "steps", "eval_steps": steps, "do_eval": True,
            "per_device_eval_batch_size": spec.batch_size}


def advanced_kwargs(spec: RunSpec) -> dict[str, Any]:
    """The advanced settings, by TRL's names. transformers 5 dropped ``warmup_ratio``: a float
    below 1 in ``warmup_steps`` is read as the ratio."""
    return {
        "epsilon_high": spec.epsilon_high, "loss_type": spec.loss_type,
        "num_iterations": spec.num_iterations, "top_p": spec.top_p, "top_k": spec.top_k,
        "mask_truncated_completions": spec.mask_truncated_completions,
        "max_grad_norm": spec.max_grad_norm, "warmup_steps": spec.warmup_ratio or 0,
        "lr_scheduler_type": spec.lr_scheduler_type, "use_vllm": check_vllm(spec.use_vllm),
        **({"vllm_mode": spec.vllm_mode,
            "vllm_gpu_memory_utilization": spec.vllm_gpu_memory_utilization}
           if spec.use_vllm else {}),
    }


def precision_kwargs(spec: RunSpec, hardware: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``mixed_precision`` as GRPOConfig's bf16/fp16 flags (the trainer's accelerator
    takes its precision from them, also under ``accelerate launch``); "auto" keeps the
    hardware's choice (``hardware_kwargs``)."""
    if spec.mixed_precision == "auto":
        return {}
    if spec.mixed_precision == "fp16" and hardware.get("use_cpu"):
        raise ValueError("mixed_precision=fp16 needs a GPU and this worker has none")
    return {"bf16": spec.mixed_precision == "bf16", "fp16": spec.mixed_precision == "fp16"}


def check_vllm(wanted: bool) -> bool:
    """vLLM generation needs a CUDA GPU and the vllm package: without them the run fails at
    once, saying which is missing, instead of deep inside TRL."""
    if not wanted:
        return False
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise ValueError("use_vllm needs a CUDA GPU and this worker has none: "
                         "launch without use_vllm to generate with transformers")
    if importlib.util.find_spec("vllm") is None:
        raise ValueError("use_vllm needs the vllm package, which this worker does not have")
    return True


def save_kwargs(spec: RunSpec) -> dict[str, Any]:
    """Checkpoints only when asked for (the dashboard keeps metrics, not weights)."""
    if spec.save_steps is None:
        return {"save_strategy": "no"}
    return {"save_strategy": "steps", "save_steps": spec.save_steps}


def grpo_kwargs(spec: RunSpec, output_dir: str) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for a spec (kept separate so tests can inspect them)."""
    hardware = hardware_kwargs()
    return {
        "output_dir": output_dir,
        "num_generations": spec.num_generations,
        "per_device_train_batch_size": spec.batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
        "max_steps": spec.max_steps,
        "learning_rate": spec.learning_rate,
        "beta": spec.beta,
        "epsilon": spec.epsilon,
        "max_completion_length": spec.max_completion_length,
        "temperature": spec.temperature,
        "scale_rewards": spec.scale_rewards,
        "reward_weights": [r.weight for r in spec.rewards],
        "logging_strategy": "steps",
        "logging_steps": spec.logging_steps,
        "seed": spec.seed,
        "report_to": "none",
        "log_completions": False,
        "disable_tqdm": True,  # progress bars would flood the stderr tail the task shows on failure
        **advanced_kwargs(spec),
        **save_kwargs(spec),
        **eval_kwargs(spec),
        **hardware,
        **precision_kwargs(spec, hardware),
    }


def build_grpo_config(spec: RunSpec, output_dir: str) -> GRPOConfig:
    """A validated GRPOConfig (TRL checks group divisibility of the generation/eval batches)."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(spec, output_dir))


def lora_kwargs(spec: RunSpec) -> dict[str, Any] | None:
    """The ``peft.LoraConfig`` keyword arguments for a spec, None without ``use_peft``; as
    TRL's own ``get_peft_config`` builds them from its ModelConfig (same names, same defaults)."""
    if not spec.use_peft:
        return None
    return {"task_type": "CAUSAL_LM", "r": spec.lora_r, "lora_alpha": spec.lora_alpha,
            "lora_dropout": spec.lora_dropout, "target_modules": spec.lora_target_modules,
            "bias": "none"}


def build_peft_config(spec: RunSpec) -> LoraConfig | None:
    """The LoRA adapter GRPOTrainer wraps the model in (``peft_config=``), or None."""
    kwargs = lora_kwargs(spec)
    if kwargs is None:
        return None
    from peft import LoraConfig

    return LoraConfig(**kwargs)


def check_target_modules(model: Any, spec: RunSpec) -> None:
    """Refuse, before the trainer is built, LoRA target modules the model does not have. peft
    itself fails only when none matches and merely warns when some do: a typo would then train
    fewer modules than asked. The message keeps peft's words and adds the model's linear layers."""
    names = spec.lora_target_modules
    if not spec.use_peft or not isinstance(names, list):
        return  # None: peft's default for the model type; "all-linear": peft finds them
    import torch

    modules = [key for key, _ in model.named_modules()]
    missing = [n for n in names if not any(k == n or k.endswith(f".{n}") for k in modules)]
    if missing:
        linear = sorted({key.rsplit(".", 1)[-1] for key, module in model.named_modules()
                         if isinstance(module, torch.nn.Linear)})
        raise ValueError(f"Target modules {set(missing)} not found in the base model. Please "
                         "check the target modules and try again. This model's linear layers: "
                         f"{', '.join(linear)}")
