"""What differs between run specs: the clone's "what changed" and the compare page's table.

Specs are flattened to dotted paths (``rewards.0.params.target``) so a change deep inside a
reward shows as that one field, not as "rewards differ".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpodeck.contract.alerts import masked_spec

MISSING = "—"  # the field is absent from this spec
NOT_SET = "not set"  # the field is there, as null: said in words, never a raw "null"
IGNORED = ("name",)  # every clone and every compared run has its own name: not a difference


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: "{}"}
    if isinstance(value, list) and value and any(isinstance(v, Mapping) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: value}


def shown(value: Any) -> str:
    """One cell: strings as they are, null as "not set", everything else as JSON (lists,
    numbers)."""
    if value is MISSING or isinstance(value, str):
        return value
    if value is None:
        return NOT_SET
    return json.dumps(value)


@dataclass(frozen=True)
class Difference:
    field: str
    values: list[str]  # one per spec, in the order given


def spec_differences(specs: Sequence[Mapping[str, Any]],
                     ignore: Sequence[str] = IGNORED) -> list[Difference]:
    """The fields whose values are not all equal, in a stable order (field name)."""
    flat = [flatten(masked_spec(dict(s))) for s in specs]  # alert URLs: scheme and host only
    fields = sorted({k for f in flat for k in f} - set(ignore))
    out = []
    for field in fields:
        values = [f.get(field, MISSING) for f in flat]
        if any(v != values[0] for v in values[1:]):
            out.append(Difference(field, [shown(v) for v in values]))
    return out


def spec_changes(parent: Mapping[str, Any], child: Mapping[str, Any]) -> list[Difference]:
    """A clone's changes from its parent, name included (a renamed clone says so)."""
    return spec_differences([parent, child], ignore=())
