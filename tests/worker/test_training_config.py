"""RunSpec -> TRL 1.16 GRPOConfig mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpodeck.contract.spec import RunSpec
from worker.training.config import build_grpo_config, grpo_kwargs
from worker.training.hardware import hardware_kwargs


def test_defaults_map_to_a_valid_config(tmp_path: Path) -> None:
    spec = RunSpec(model="builtin:tiny-random", max_steps=7, learning_rate=3e-5, beta=0.0,
                   epsilon=0.3, temperature=0.7, max_completion_length=16, seed=5, logging_steps=2)
    cfg = build_grpo_config(spec, str(tmp_path))
    assert cfg.num_generations == 4 and cfg.per_device_train_batch_size == 4
    assert cfg.generation_batch_size == 4 and cfg.steps_per_generation == 1
    assert (cfg.max_steps, cfg.learning_rate, cfg.beta, cfg.epsilon) == (7, 3e-5, 0.0, 0.3)
    assert (cfg.temperature, cfg.max_completion_length, cfg.seed) == (0.7, 16, 5)
    assert cfg.logging_steps == 2 and cfg.report_to == []
    assert cfg.save_strategy == "no" and cfg.eval_strategy == "no"
    assert cfg.reward_weights == [1.0] and cfg.scale_rewards == "group"
    assert cfg.output_dir == str(tmp_path)


def test_batch_of_several_groups(tmp_path: Path) -> None:
    spec = RunSpec(num_generations=4, per_device_train_batch_size=8)
    cfg = build_grpo_config(spec, str(tmp_path))
    assert cfg.per_device_train_batch_size == 8 and cfg.generation_batch_size == 8


@pytest.mark.parametrize("mode", ["group", "batch", "none"])
def test_scale_rewards(tmp_path: Path, mode: str) -> None:
    assert build_grpo_config(RunSpec(scale_rewards=mode), str(tmp_path)).scale_rewards == mode


def test_reward_weights_follow_spec_order(tmp_path: Path) -> None:
    spec = RunSpec(rewards=[{"name": "format_tag", "weight": 0.5},
                            {"name": "exact_answer", "weight": 2.0},
                            {"name": "length_target", "params": {"target": 10}}])
    assert build_grpo_config(spec, str(tmp_path)).reward_weights == [0.5, 2.0, 1.0]


def test_eval_split_turns_on_step_evaluation(tmp_path: Path) -> None:
    spec = RunSpec(eval_split="test", eval_steps=3, max_steps=9, num_generations=2,
                   per_device_train_batch_size=6)
    cfg = build_grpo_config(spec, str(tmp_path))
    assert cfg.eval_strategy == "steps" and cfg.eval_steps == 3 and cfg.do_eval
    assert cfg.per_device_eval_batch_size == 6  # whole groups, as TRL requires


def test_eval_split_without_eval_steps_evaluates_a_few_times(tmp_path: Path) -> None:
    kw = grpo_kwargs(RunSpec(eval_split="test", max_steps=20), str(tmp_path))
    assert kw["eval_strategy"] == "steps" and kw["eval_steps"] == 5
    kw = grpo_kwargs(RunSpec(eval_split="test", max_steps=2), str(tmp_path))
    assert kw["eval_steps"] == 1


def test_cpu_settings(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")  # the CI/dev workers are CPU-only
    assert hardware_kwargs()["use_cpu"] is True
    cfg = build_grpo_config(RunSpec(), str(tmp_path))
    assert cfg.use_cpu and not cfg.bf16 and not cfg.fp16 and not cfg.activation_checkpointing


ADVANCED = {"epsilon_high": 0.28, "loss_type": "dr_grpo", "num_iterations": 2, "top_p": 0.9,
            "top_k": 50, "mask_truncated_completions": True, "gradient_accumulation_steps": 2,
            "max_grad_norm": 0.5, "warmup_ratio": 0.1, "lr_scheduler_type": "cosine",
            "save_steps": 5}


def test_advanced_settings_reach_the_grpo_config(tmp_path: Path) -> None:
    cfg = build_grpo_config(RunSpec(max_steps=20, **ADVANCED), str(tmp_path))
    assert (cfg.epsilon_high, cfg.loss_type, cfg.num_iterations) == (0.28, "dr_grpo", 2)
    assert (cfg.top_p, cfg.top_k, cfg.mask_truncated_completions) == (0.9, 50, True)
    assert (cfg.gradient_accumulation_steps, cfg.max_grad_norm) == (2, 0.5)
    assert cfg.warmup_steps == 0.1 and cfg.lr_scheduler_type == "cosine"
    assert cfg.save_strategy == "steps" and cfg.save_steps == 5
    assert cfg.use_vllm is False


def test_advanced_defaults_are_trls(tmp_path: Path) -> None:
    from trl import GRPOConfig

    ours = build_grpo_config(RunSpec(), str(tmp_path))
    trls = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False)
    for key in ("loss_type", "num_iterations", "top_p", "top_k", "mask_truncated_completions",
                "max_grad_norm", "warmup_steps", "lr_scheduler_type", "epsilon_high"):
        assert getattr(ours, key) == getattr(trls, key), key


def test_vllm_is_refused_without_a_gpu_or_vllm(tmp_path: Path) -> None:
    """This machine has no GPU (or, on a GPU one, no vllm): the run is refused, saying why."""
    import torch

    missing = "a CUDA GPU" if not torch.cuda.is_available() else "the vllm package"
    with pytest.raises(ValueError, match=f"use_vllm needs {missing}"):
        build_grpo_config(RunSpec(use_vllm=True), str(tmp_path))
