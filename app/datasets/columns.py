"""Refuse a launch whose uploaded dataset lacks a column its rewards read.

Without this the run is queued, loads its model and fails at the first reward call with a
KeyError deep in TRL; here the person learns which column is missing before anything starts.
Only uploaded files are checked (they sit in the app's datasets directory); built-ins carry
their columns and hub datasets are the worker's to read.
"""

from __future__ import annotations

from app.core.config import get_settings
from app.datasets import store
from grpodeck.contract.catalog import reward_columns
from grpodeck.contract.spec import RunSpec


def missing_column_problem(spec: RunSpec) -> str | None:
    """Why this spec's uploaded dataset cannot feed its rewards, or None when it can (or the
    dataset is not an upload)."""
    directory = get_settings().datasets_dir
    if spec.dataset not in store.list_names(directory):
        return None
    try:
        _, columns = store.validate((directory / spec.dataset).read_bytes(), spec.dataset)
    except (OSError, store.DatasetError):
        return None  # gone or changed since upload: the worker reports what it finds
    for reward in spec.rewards:
        for column in reward_columns(reward.name, reward.params):
            if column not in columns:
                return (f"dataset {spec.dataset!r} has no {column!r} column, which reward "
                        f"{reward.name} needs (its columns: {', '.join(columns)})")
    return None
