"""Bounds both ends agree on, each written once: what a run spec may ask for and how large a
report may be. The server refuses (422) what is past them; clients cut or never send it.
"""

from __future__ import annotations

# --- a run spec: what TRL 1.16 and one accelerator can run, so a typo (1e30) is refused at
# launch instead of breaking the run on the worker.
MAX_STEPS = 1_000_000  # a million optimizer steps: months on one GPU
MAX_TOKENS = 131_072  # the longest context windows of current open models (128k)
MAX_BATCH = 4_096  # completions per device step; far beyond what one H200 holds in activations
MAX_SEED = 2**32 - 1  # numpy's seed range (transformers.set_seed seeds numpy too)
MAX_PATH = 1_024  # a hub id is at most 96 characters; a local path well under PATH_MAX

# --- reports
# Steps are a trainer's optimizer step count: two billion is beyond any run, and it is what a
# 32-bit integer column (PostgreSQL ``integer``) holds. Larger values are refused (422).
MAX_STEP = 2**31
# The completion text cap: a runaway completion must not make a report POST huge. Clients cut
# prompts and completions here (``text.clip``).
MAX_TEXT_CHARS = 20_000
# Model output is untrusted: the server cuts text past twice the cap rather than refuse a batch.
MAX_STORED_TEXT = MAX_TEXT_CHARS * 2
MAX_ROWS = 10_000  # metric rows per batch
# What a 32-bit integer column holds (PostgreSQL ``integer``): every other integer the API takes
# for such a column (a pid) is bounded by it, so a larger one is a 422, not a database error.
MAX_INT32 = 2**31 - 1
MAX_ROLLOUT_STEPS = 200  # captured steps per batch
