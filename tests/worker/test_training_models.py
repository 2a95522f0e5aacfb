"""Built-in models: built offline, cached atomically, and usable by the trainer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from worker.training import models

ROOT = Path(__file__).resolve().parents[2]


def test_tiny_random_builds_once_and_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_CACHE_DIR", str(tmp_path))
    model, tok = models.load_model_and_tokenizer("builtin:tiny-random")
    path = models.builtin_path("builtin:tiny-random")
    assert path.is_relative_to(tmp_path) and (path / "config.json").exists()
    weights = path / "model.safetensors"
    built_at = weights.stat().st_mtime_ns

    assert model.config.model_type == "qwen2"
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tok) <= 1024
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert model.generation_config.eos_token_id == tok.eos_token_id
    text = "Describe the sea in one sentence."
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level BPE round-trips
    rendered = tok.apply_chat_template([{"role": "user", "content": text}],
                                       add_generation_prompt=True, tokenize=False)
    assert rendered == f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"

    model2, _ = models.load_model_and_tokenizer("builtin:tiny-random")
    assert weights.stat().st_mtime_ns == built_at  # loaded from the cache, not rebuilt
    for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp dirs left behind


def test_concurrent_builds_do_not_corrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_CACHE_DIR", str(tmp_path))
    errors: list[BaseException] = []

    def build() -> None:
        try:
            models.ensure_builtin("builtin:tiny-random")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a build hung"
    assert not errors
    path = models.builtin_path("builtin:tiny-random")
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    models.load_model_and_tokenizer("builtin:tiny-random")


def test_unreachable_hub_model_fails_with_clear_message() -> None:
    # A subprocess, because huggingface_hub reads HF_HUB_OFFLINE at import time (offline it fails
    # at once instead of retrying the unreachable hub for ~45 s).
    code = ("from worker.training.models import load_model_and_tokenizer\n"
            "load_model_and_tokenizer('nobody-here/definitely-not-a-model')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=False,
                          timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0
    assert "ModelLoadError: could not load model 'nobody-here/definitely-not-a-model'" in proc.stderr
    assert "built-ins or a local directory" in proc.stderr


def test_local_directory_loads_from_the_models_directory_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = models.ensure_builtin("builtin:tiny-random")  # default cache: reused across tests
    monkeypatch.setenv("GRPODECK_MODELS_DIR", str(tmp_path / "models"))
    shutil.copytree(src, tmp_path / "models" / "tiny")
    for ref in ("tiny", str(tmp_path / "models" / "tiny")):
        model, tok = models.load_model_and_tokenizer(ref)
        assert model.config.hidden_size == 64 and tok.chat_template
    (tmp_path / "models" / "linked").symlink_to(src)  # a real checkpoint, but outside
    messages = set()
    for ref in (str(src), "linked", "../../etc", "/no/such/model", "/etc"):
        with pytest.raises(models.ModelLoadError) as info:
            models.load_model_and_tokenizer(ref)
        messages.add(str(info.value))
    assert len(messages) == 1 and "models directory" in messages.pop()
    with pytest.raises(models.ModelLoadError, match="'absent' not found in this worker's models"):
        models.load_model_and_tokenizer("absent")


@pytest.mark.slow
def test_smollm2_converts_loads_and_answers() -> None:
    model, tok = models.load_model_and_tokenizer("builtin:smollm2-135m-instruct")
    path = models.builtin_path("builtin:smollm2-135m-instruct")
    assert (path / "model.safetensors").exists()
    assert "quantization_config" not in (path / "config.json").read_text()
    assert model.dtype == torch.float32 and model.config.num_hidden_layers == 30
    inputs = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=20, do_sample=False)
    reply = tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in reply
