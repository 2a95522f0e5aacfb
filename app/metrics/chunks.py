"""One metric's points over a range of steps as one compressed blob: the chunk codec.

Why: one B-tree row per point cost 46 bytes a point on SQLite and 173-220 on PostgreSQL (the
row header, the primary key's index entry and the metric's name in every row), and a whole
series was one Python tuple per point (issue 57). A chunk holds every point of one metric whose
step falls in one aligned range of ``CHUNK_STEPS`` steps: the steps as deltas and the values as
float64, each byte-shuffled (the n-th byte of every number side by side, so the high bytes of
small deltas and the sign/exponent bytes of similar values become long runs) and compressed
with zstd. Reading decodes a whole series in a few numpy calls.

NaN, inf and -inf are float64 values like any other, so a chunk keeps them exactly; their text
("nan", "inf", "-inf", what the API writes) is ``repr`` of the value.

The first byte is the format's version, so a later codec can read the blobs of this one.
"""

from __future__ import annotations

import numpy as np
import zstandard

CHUNK_BITS = 10
CHUNK_STEPS = 1 << CHUNK_BITS  # 1,024 steps: 64 level-1 buckets of the summaries, 4 of level 2
FORMAT = 1
LEVEL = 3  # zstd level: a live run's open chunk is rewritten on every settle
_HEADER = bytes([FORMAT])

Points = tuple[np.ndarray, np.ndarray]  # (steps int64, values float64), steps ascending, unique


def chunk_of(step: int) -> int:
    """The chunk index a step belongs to."""
    return step >> CHUNK_BITS


def split(points: Points) -> list[tuple[int, Points]]:
    """The points (ascending steps) cut where their chunk changes: (chunk index, its points)."""
    steps, values = points
    index = steps >> CHUNK_BITS
    cuts = np.flatnonzero(np.diff(index)) + 1
    return [(int(index[part[0]]), (steps[part], values[part]))
            for part in np.split(np.arange(steps.size), cuts)]


def _shuffle(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array.view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(data: bytes, n: int, dtype: type) -> np.ndarray:
    return np.frombuffer(data, np.uint8).reshape(8, n).T.copy().view(dtype).reshape(n)


def encode(steps: np.ndarray, values: np.ndarray) -> bytes:
    """The blob of ``steps`` (ascending, unique) and their ``values``."""
    deltas = np.diff(steps.astype(np.int64), prepend=np.int64(0))
    body = _shuffle(deltas) + _shuffle(values.astype(np.float64))
    return _HEADER + zstandard.ZstdCompressor(level=LEVEL).compress(body)


def decode(blob: bytes, n: int) -> Points:
    """(steps, values) of a blob holding ``n`` points."""
    if not blob or blob[0] != FORMAT:
        raise ValueError(f"not a metric chunk of format {FORMAT}")
    body = zstandard.ZstdDecompressor().decompress(blob[1:], max_output_size=16 * n)
    if len(body) != 16 * n:
        raise ValueError(f"a metric chunk of {n} points holds {len(body)} bytes")
    steps = np.cumsum(_unshuffle(body[:8 * n], n, np.int64))
    return steps, _unshuffle(body[8 * n:], n, np.float64)


def merge(old: Points, new: Points) -> Points:
    """``old`` with ``new``'s points written over it: a re-sent step keeps its new value once."""
    old_steps, old_values = old
    new_steps, new_values = new
    if not old_steps.size:
        return new
    if new_steps[0] > old_steps[-1]:  # the usual case: newer steps, appended
        return np.concatenate([old_steps, new_steps]), np.concatenate([old_values, new_values])
    keep = ~np.isin(old_steps, new_steps)
    steps = np.concatenate([old_steps[keep], new_steps])
    values = np.concatenate([old_values[keep], new_values])
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order]


def columns(steps: np.ndarray, values: np.ndarray) -> dict[str, object]:
    """A chunk row's columns besides its key: what the store and the migration both write."""
    return {"first_step": int(steps[0]), "last_step": int(steps[-1]), "n": int(steps.size),
            "last_finite": last_finite(values), "data": encode(steps, values)}


def last_finite(values: np.ndarray) -> float | None:
    """The chunk's last finite value (the runs list sorts by it), None when there is none."""
    at = np.flatnonzero(np.isfinite(values))
    return float(values[at[-1]]) if at.size else None
