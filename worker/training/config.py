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
    from trl import GRPOConfig

    from grpodeck.contract.spec import RunSpec

# With an eval split but no eval_steps, evaluate about this many times per run.
DEFAULT_EVALS_PER_RUN = 4


def eval_kwargs(spec: RunSpec) -> dict[str, Any]:
    """Evaluation only happens with an eval split; the eval batch holds whole groups like training."""
    if not spec.eval_split:
        return {"eval_strategy": "no", "do_eval": False}
    steps = spec.eval_steps or max(1, spec.max_steps // DEFAULT_EVALS_PER_RUN)
    return {"eval_strategy": "steps", "eval_steps": steps, "do_eval": True,
            "per_device_eval_batch_size": spec.batch_size}


def grpo_kwargs(spec: RunSpec, output_dir: str) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for a spec (kept separate so tests can inspect them)."""
    return {
        "output_dir": output_dir,
        "num_generations": spec.num_generations,
        "per_device_train_batch_size": spec.batch_size,
        "gradient_accumulation_steps": 1,
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
        "save_strategy": "no",
        "log_completions": False,
        "disable_tqdm": True,  # progress bars would flood the stderr tail the task shows on failure
        **eval_kwargs(spec),
        **hardware_kwargs(),
    }


def build_grpo_config(spec: RunSpec, output_dir: str) -> GRPOConfig:
    """A validated GRPOConfig (TRL checks group divisibility of the generation/eval batches)."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(spec, output_dir))
