"""Prompt datasets for a run: built-ins generated offline, local JSON(L) files, hub datasets.

Every dataset comes back as a ``datasets.Dataset`` with a conversational ``prompt`` column
(``[{"role": "user", "content": ...}]``) plus any extra columns, which TRL forwards to the reward
functions as keyword arguments (e.g. ``answer`` for ``exact_answer``). Built-ins are generated
deterministically from the spec's seed so two runs with the same spec see the same prompts.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpodeck.contract.catalog import is_local_dataset
from worker.paths import confine
from worker.training.code_datasets import CODE_BUILTINS

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

    from grpodeck.contract.spec import RunSpec

SHORT_PROMPT_TEMPLATES: tuple[str, ...] = (
    "Describe {} in one sentence.", "Give me a fun fact about {}.", "What is {}?",
    "Write a short poem about {}.", "Why do people like {}?", "Name three things related to {}.",
    "Explain {} to a child.", "Give one tip about {}.", "What color is usually linked to {}?",
    "Tell me something surprising about {}.", "Write a haiku about {}.",
    "Summarize {} in five words.", "What is the opposite of {}?", "How would you draw {}?",
    "Give a short title for a story about {}.", "What sound reminds you of {}?",
    "Is {} useful? Answer briefly.", "Write a slogan about {}.",
    "List two questions about {}.", "What is the best thing about {}?",
)
SHORT_PROMPT_SUBJECTS: tuple[str, ...] = (
    "the sea", "cats", "the moon", "coffee", "rain", "music", "trees", "bicycles", "winter",
    "bread", "mountains", "friendship", "clocks", "the sun", "rivers", "books", "birds",
    "gardens", "trains", "snow",
)
ARITHMETIC_SIZE = 500
# Held-out share of a local file when an eval split is asked for.
EVAL_FRACTION = 0.2
# Held-out prompts of a built-in: small, because every eval generates num_generations completions
# for each of them (32 prompts x 4 on SmolLM2/CPU is already a few minutes).
BUILTIN_EVAL_ROWS = 32
BUILTIN_EVAL_SPLITS = ("test", "validation", "eval")


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _short_prompts(seed: int) -> list[dict[str, Any]]:
    rows = [{"prompt": _chat(t.format(s))} for t in SHORT_PROMPT_TEMPLATES for s in SHORT_PROMPT_SUBJECTS]
    random.Random(seed).shuffle(rows)
    return rows


def _arithmetic(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(ARITHMETIC_SIZE):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        rows.append({"prompt": _chat(f"What is {a} + {b}? Reply with just the number."),
                     "answer": str(a + b)})
    return rows


_BUILTINS = {"builtin:short-prompts": _short_prompts, "builtin:arithmetic": _arithmetic}


def builtin_rows(name: str, seed: int) -> tuple[list[dict[str, Any]], int]:
    """A built-in's rows and how many of the last ones an eval split holds out."""
    if name in CODE_BUILTINS:
        make, eval_rows = CODE_BUILTINS[name]
        return make(), eval_rows
    return _BUILTINS[name](seed), BUILTIN_EVAL_ROWS


def _builtin(spec: RunSpec) -> tuple[Dataset, Dataset | None]:
    """Hold out the last eval rows (``BUILTIN_EVAL_ROWS``, fewer for small sets) when an eval
    split is requested."""
    from datasets import Dataset

    rows, eval_rows = builtin_rows(spec.dataset, spec.seed)
    if spec.eval_split is None:
        return Dataset.from_list(rows), None
    if spec.eval_split not in BUILTIN_EVAL_SPLITS or spec.eval_split == spec.train_split:
        raise ValueError(f"built-in datasets have eval splits {', '.join(BUILTIN_EVAL_SPLITS)}, "
                         f"got {spec.eval_split!r}")
    cut = len(rows) - eval_rows
    return Dataset.from_list(rows[:cut]), Dataset.from_list(rows[cut:])


def datasets_dir() -> Path:
    """This worker's own datasets directory (``GRPODECK_DATASETS_DIR``), read on every call."""
    from worker.settings import WorkerSettings

    return WorkerSettings().datasets_dir


def local_dataset_path(ref: str) -> Path:
    """The file a local reference names, checked here on the host that reads it (bug 4).

    The web app checked the spec against its own directory; a spec that bypassed it (or a web app
    configured differently) still cannot make this worker read outside its directory. Outside
    paths get one message whether they exist or not; inside, a missing file is said to be missing.
    """
    path = confine(ref, datasets_dir(), "dataset")
    if not path.is_file():
        raise ValueError(f"dataset file {ref!r} not found in this worker's datasets directory")
    return path


def _normalise(ds: Dataset, source: str, *, list_columns: bool = True) -> Dataset:
    """Accept a ``prompt`` column (text or messages) or a ``question`` column; text becomes chat.

    Column names are listed only for hub datasets, never for local files (bug 4)."""
    if "prompt" not in ds.column_names:
        if "question" not in ds.column_names:
            found = f"; it has {', '.join(ds.column_names)}" if list_columns else ""
            raise ValueError(f"dataset {source} needs a 'prompt' (or 'question') column{found}")
        ds = ds.rename_column("question", "prompt")
    if isinstance(ds[0]["prompt"], str):
        ds = ds.map(lambda row: {"prompt": _chat(row["prompt"])})
    return ds


def _local_file(spec: RunSpec) -> tuple[Dataset, Dataset | None]:
    """A .json/.jsonl file is one split; an eval split is carved off deterministically."""
    from datasets import load_dataset

    path = local_dataset_path(spec.dataset)
    try:
        raw = load_dataset("json", data_files=str(path), split="train")
    except Exception as exc:  # noqa: BLE001 - parser errors quote the file: name only the type
        raise ValueError(f"dataset file {spec.dataset!r} is not JSON lines with one object per "
                         f"row ({type(exc).__name__})") from None
    ds = _normalise(raw, repr(spec.dataset), list_columns=False)
    if spec.eval_split is None:
        return ds, None
    parts = ds.train_test_split(test_size=EVAL_FRACTION, seed=spec.seed)
    return parts["train"], parts["test"]


def _hub(spec: RunSpec) -> tuple[Dataset, Dataset | None]:
    from datasets import load_dataset

    try:
        train = load_dataset(spec.dataset, spec.dataset_config, split=spec.train_split)
        evals = (load_dataset(spec.dataset, spec.dataset_config, split=spec.eval_split)
                 if spec.eval_split else None)
    except (OSError, ConnectionError) as exc:
        raise RuntimeError(f"could not load dataset {spec.dataset!r} from the Hugging Face Hub: {exc}. "
                           "Offline workers can use the built-ins or a local .jsonl file.") from exc
    return (_normalise(train, spec.dataset),
            _normalise(evals, spec.dataset) if evals is not None else None)


def load_prompts(spec: RunSpec) -> tuple[Dataset, Dataset | None]:
    """Return ``(train_dataset, eval_dataset or None)`` for the spec's dataset reference."""
    if spec.dataset.startswith("builtin:"):
        return _builtin(spec)
    if is_local_dataset(spec.dataset):
        return _local_file(spec)
    return _hub(spec)


def drop_long_prompts(ds: Dataset, tokenizer: PreTrainedTokenizerBase, max_len: int | None) -> Dataset:
    """TRL 1.x no longer truncates prompts (``max_prompt_length`` is gone), so we honour the spec's
    ``max_prompt_length`` by dropping prompts whose chat-rendered length exceeds it."""
    if max_len is None:
        return ds

    def fits(row: dict[str, Any]) -> bool:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # transformers 5 returns a BatchEncoding
        return len(ids) <= max_len

    kept = ds.filter(fits)
    if len(kept) == 0:
        raise ValueError(f"no prompt fits max_prompt_length={max_len} tokens")
    return kept
