"""LoRA (peft): the spec's use_peft trains an adapter on top of frozen base weights, with TRL's
defaults, on the tiny built-in model, reporting to a real HTTP receiver."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpodeck.contract.spec import RunSpec
from tests.conftest import tiny_spec
from worker.training.child import train
from worker.training.config import build_peft_config
from worker.training.models import TINY_RANDOM, load_model_and_tokenizer

LORA = {"use_peft": True, "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
        "lora_target_modules": ["q_proj", "v_proj"]}


def test_lora_defaults_are_trls() -> None:
    """Our LoraConfig for a bare ``use_peft`` is the one TRL builds from its own ModelConfig."""
    from trl import ModelConfig
    from trl.trainer.utils import get_peft_config

    ours = build_peft_config(RunSpec(use_peft=True))
    trls = get_peft_config(ModelConfig(use_peft=True))
    assert ours is not None and trls is not None
    assert ours.to_dict() == trls.to_dict()
    assert build_peft_config(RunSpec()) is None


def test_spec_lora_settings_reach_the_lora_config() -> None:
    config = build_peft_config(RunSpec(**LORA))
    assert (config.r, config.lora_alpha, config.lora_dropout) == (4, 8, 0.0)
    assert config.target_modules == {"q_proj", "v_proj"}
    assert build_peft_config(RunSpec(use_peft=True, lora_target_modules="all-linear")
                             ).target_modules == "all-linear"


def test_lora_trains_the_adapter_only(receiver, tmp_path: Path) -> None:
    trainer = train(tiny_spec(max_steps=3, save_steps=3, learning_rate=1e-2, **LORA), 21,
                    receiver.url, "tok", str(tmp_path))
    from peft import PeftModel

    model = trainer.model
    assert isinstance(model, PeftModel)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    # 2 layers x (q_proj, v_proj) x (lora_A, lora_B): nothing else trains
    assert len(trainable) == 8 and all(".lora_" in n for n in trainable), trainable
    assert {n.split(".self_attn.")[1].split(".")[0] for n in trainable} == {"q_proj", "v_proj"}
    # the base weights are the checkpoint's, bit for bit
    base, _ = load_model_and_tokenizer(TINY_RANDOM)
    after = {k.replace(".base_layer", ""): v
             for k, v in model.get_base_model().state_dict().items() if ".lora_" not in k}
    before = base.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k].cpu(), before[k]) for k in before)
    # the adapter moved: lora_B starts at zero (peft's init), so the adapter starts as a no-op
    lora_b = [p for n, p in model.named_parameters() if ".lora_B." in n]
    assert len(lora_b) == 4 and all(p.abs().sum() > 0 for p in lora_b)
    assert [r["step"] for r in receiver.rows if "loss" in r["metrics"]] == [1, 2, 3]
    # a checkpoint holds the adapter, not a copy of the whole model
    checkpoint = tmp_path / "checkpoint-3"
    assert (checkpoint / "adapter_config.json").is_file()
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert not (checkpoint / "model.safetensors").exists()


def test_unknown_target_module_is_refused_before_training(receiver, tmp_path: Path) -> None:
    """peft only warns when some names match: the worker refuses the typo in peft's words."""
    spec = tiny_spec(max_steps=1, **{**LORA, "lora_target_modules": ["q_proj", "qproj"]})
    with pytest.raises(ValueError, match=r"Target modules \{'qproj'\} not found in the base "
                                         r"model\. .*linear layers: down_proj, gate_proj"):
        train(spec, 22, receiver.url, "tok", str(tmp_path))
    assert receiver.rows == []
