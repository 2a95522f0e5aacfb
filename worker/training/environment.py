"""Environment variables set for a while, then put back as they were.

Hugging Face libraries read their switches (offline mode, integrations) from the environment
when they are imported; the worker sets them around an import or a load in a process that goes
on afterwards (a pool process, an in-process caller), which must be left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# A child trains with ``report_to="none"`` (it reports to the Deck) and a dry run trains nothing,
# yet importing TRL imports MLflow wherever it is installed (``trl.extras.profiling``): ~1 s of
# CPU per start. This is transformers' own switch for it, set for every import of the training
# stack (a fresh child's environment, a pool process's warm preload).
QUIET_INTEGRATIONS = {"DISABLE_MLFLOW_INTEGRATION": "TRUE"}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` inside the block; each name restored (or removed, if
    it was unset) after it."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
