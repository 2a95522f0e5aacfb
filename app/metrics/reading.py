"""How a run's metric keys are read as the Deck's canonical names: one rule for every path.

Why one module: a verl run reported live (the client, ``DeckTracking``, the MLflow API) used to
be read with TRL's names only, while the same numbers imported from a log were read with verl's
table, so the live run's verdict was ``unknown``. Live batches, imports and ``grpodeck diagnose``
now all go through :func:`read_rows`, with the same trainer vocabulary
(``app.metrics.names.VOCABULARIES``) and the same user mapping (``metric_map`` / ``--map``).

A run's :class:`Reading` is kept with the run (``runs.metric_reading``): its vocabulary, once
detected, and each rename, decided the first time a key is seen, so every later batch of the
run is read the same way, whatever keys that batch happens to hold. Stored points, charts and
detectors use the canonical names; the renames are what the run page lists as "read as".
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from app.core.logged_names import logged_names
from app.metrics.inference import Column, columns, infer
from app.metrics.names import (
    VOCABULARIES,
    Row,
    canonical_name,
    detect_vocabulary,
    rename_rows,
    resolve_table,
)

TRL = "trl"  # a pinned vocabulary: TRL's names only, no detection
MAX_RENAMES = 2_000  # bounds the JSON kept on the run row, however many new keys batches bring


def vocabulary_names() -> tuple[str, ...]:
    """Every vocabulary a run may name: the trainer tables and ``trl`` (no table)."""
    return (TRL, *VOCABULARIES)


def canonical_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """A user mapping with both sides in TRL's newest spelling: rows reach the reader already
    normalised (``completion_length`` is ``completions/mean_length`` by then), so a key the
    user wrote in an old spelling still matches."""
    return {canonical_name(k): canonical_name(v) for k, v in (mapping or {}).items()
            if k.strip() and v.strip()}


@dataclass(frozen=True)
class Reading:
    """A run's reading: ``vocabulary`` (None: not known yet, detect it from the keys),
    the user's ``mapping`` (key -> canonical name; it wins over the vocabulary), and the
    ``renames`` decided so far (key -> canonical name)."""

    vocabulary: str | None = None
    mapping: Mapping[str, str] = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, vocabulary: str | None = None,
              mapping: Mapping[str, str] | None = None) -> Reading:
        """A run's reading before any key is seen; raises ValueError for an unknown vocabulary
        (the message lists the known ones)."""
        if vocabulary is not None and vocabulary not in vocabulary_names():
            raise ValueError(f"unknown vocabulary {vocabulary!r}: use one of "
                             f"{', '.join(vocabulary_names())}")
        return cls(vocabulary, canonical_mapping(mapping))

    @classmethod
    def from_json(cls, data: Any) -> Reading:
        """What ``as_json`` stored (None or a malformed value reads as a fresh reading)."""
        if not isinstance(data, dict):
            return cls()
        vocabulary = data.get("vocabulary")
        return cls(vocabulary if isinstance(vocabulary, str) else None,
                   _str_dict(data.get("mapping")), _str_dict(data.get("renames")))

    def as_json(self) -> dict[str, Any]:
        return {"vocabulary": self.vocabulary, "mapping": dict(self.mapping),
                "renames": dict(self.renames)}


def _str_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def resolve(keys: AbstractSet[str], reading: Reading,
            known: AbstractSet[str] = frozenset(),
            stats: Mapping[str, Column] | None = None, rows: int = 0) -> Reading:
    """``reading`` after first sight of ``keys``: the vocabulary detected when not yet known,
    a rename for each key that the user's mapping or the vocabulary's table names, then for
    each key neither names, the name its words infer (``app.metrics.inference``; ``stats``:
    what ``rows`` rows' values say of each key). A pinned ``trl`` reading infers nothing.

    ``known``: the canonical names the run already has. A table rename onto a name the run
    already has (under its own spelling, or claimed by an earlier key) is not made: the
    trainer's own number stays, and the other key keeps its name. The user's mapping always
    applies. Within one call, the earliest table entry present wins a name (as in the table).
    """
    vocabulary = reading.vocabulary or detect_vocabulary(keys)
    new = keys - reading.renames.keys() - known  # a known name was decided when first seen
    user = {k: n for k, n in reading.mapping.items() if k in new}
    user_names = set(user.values()) | {reading.mapping[k] for k in reading.renames
                                       if k in reading.mapping}
    taken = set(known) | set(reading.renames.values()) | (keys - reading.mapping.keys())
    table = VOCABULARIES.get(vocabulary or "", {})
    by_table = {k: n for k, n in resolve_table(table, new).items()
                if n not in taken and n not in user_names and k not in user}
    inferred = {} if vocabulary == TRL else infer(
        new - user.keys() - by_table.keys() - reading.mapping.keys(),
        taken | user_names | set(by_table.values()), stats, rows)
    renames = {**reading.renames, **inferred, **by_table, **user}
    if len(renames) > MAX_RENAMES:  # the earliest renames are kept; later keys stay as sent
        renames = dict(list(renames.items())[:MAX_RENAMES])
    return replace(reading, vocabulary=vocabulary, renames=renames)


def read_rows(rows: list[Row], reading: Reading,
              known: AbstractSet[str] = frozenset()) -> tuple[list[Row], Reading]:
    """Rows in canonical names, and the reading after them: the one function every path
    (live batches, the MLflow API, imports, ``grpodeck diagnose``) reads keys with.

    Keys seen before (in ``known`` or already renamed) are not looked at again, so a run's
    steady stream of batches costs one set difference and the renames it has."""
    keys = {k for _, metrics in rows for k in metrics}
    if new := keys.difference(known, reading.renames):
        stats, count = columns(rows, new)
        reading = resolve(frozenset(keys), reading, known, stats, count)
    if not reading.renames or reading.renames.keys().isdisjoint(keys):
        return rows, reading
    return rename_rows(rows, dict(reading.renames)), reading


def run_logged_names(metric_reading: Any) -> dict[str, str]:
    """``logged_names`` of a run's stored reading (``runs.metric_reading``)."""
    return logged_names(Reading.from_json(metric_reading).renames)


def titled(title: str, names: list[str], logged: Mapping[str, str]) -> str:
    """A chart's title with the keys its renamed metrics were logged as:
    ``Learning rate (logged as lr)``, ``Reward (train and eval; logged as mean_reward)``."""
    keys = [logged[n] for n in names if n in logged]
    if not keys:
        return title
    said = f"logged as {', '.join(keys)}"
    return f"{title[:-1]}; {said})" if title.endswith(")") else f"{title} ({said})"
