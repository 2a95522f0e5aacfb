"""Mutated logs for the readers' fuzz tests: real and generated logs, truncated, spliced, with
binary garbage, huge lines, deep nesting, chat templates and stray braces.

The seeds are the real public GRPO logs in ``../shared/data/real-grpo-logs`` (read from
there, never copied into the repository; ``GRPODECK_REAL_LOGS`` names another folder), the
simulated logs of ``bench/simulated_logs.py``, and one log of each format issue 32 added
(notebook, W&B CSV, TensorBoard event file, OpenRLHF dicts, a hand-written loop).
"""

from __future__ import annotations

import os
import tempfile
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from bench.simulated_logs import LOGS

ROOT = Path(__file__).resolve().parents[2]
REAL_LOG_DIRS = [Path(os.environ["GRPODECK_REAL_LOGS"])] if "GRPODECK_REAL_LOGS" in os.environ \
    else [ROOT.parent / "shared/data/real-grpo-logs", Path("/work/shared/data/real-grpo-logs")]
TEMPLATES = [b"{{ '<|im_start|>assistant' }}", b"{% for m in messages %}{{ m }}{% endfor %}",
             b"{'loss': {", b"{{{{", b"}}}}", b"{'reward': {1, 2}, 'loss': [}", b"{'kl': {{}}}",
             b"{'loss': 0.1, 'reward': np.float64(", b"Rewards: [0.1, nan, ", b"\r5/10 [",
             b'"Step","Training Loss"\n', b"step:1 - critic/score/mean:"]


def real_logs() -> list[Path]:
    """The real logs, when the shared folder is there (the simulated ones are seeds always)."""
    for folder in REAL_LOG_DIRS:
        if folder.is_dir():
            return sorted(p for p in folder.iterdir() if p.suffix in (".json", ".log"))
    return []


def _generated() -> list[bytes]:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from tests.importers.test_readers import (
        collapsing,
        loop_log,
        openrlhf_printed,
        write_notebook,
        write_wandb_csv,
    )

    rows = collapsing(30)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        notebook = write_notebook(folder / "nb.ipynb", rows).read_bytes()
        csv = write_wandb_csv(folder / "w.csv", rows).read_bytes()
        writer = EventFileWriter(str(folder / "tb"))  # TensorBoard's own writer: no torch import
        for step, metrics in rows:
            writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=[
                summary_pb2.Summary.Value(tag=f"train/{k}", simple_value=v)
                for k, v in metrics.items()])))
        writer.close()
        tb = next((folder / "tb").glob("events.out.tfevents.*")).read_bytes()
    return [notebook, csv, tb, openrlhf_printed(rows).encode(),
            loop_log(rows, lambda r: [r, r + 0.1]).encode()]


@cache
def seeds() -> tuple[bytes, ...]:
    """Every seed log's bytes (each at most 256 KB, so a mutation stays quick to read)."""
    logs = [p.read_bytes() for p in real_logs()]
    logs += [generate().encode() for generate in LOGS.values()]
    return tuple(b[:256_000] for b in logs + _generated())


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """One seed log, changed in one way (or not at all)."""
    all_seeds = seeds()
    base = all_seeds[draw(st.integers(0, len(all_seeds) - 1))]
    at = draw(st.integers(0, len(base)))
    kind = draw(st.sampled_from(["truncate", "splice", "garbage", "huge_line", "deep",
                                 "template", "flip", "as_is"]))
    if kind == "truncate":
        return base[:at]
    if kind == "splice":
        other = all_seeds[draw(st.integers(0, len(all_seeds) - 1))]
        return base[:at] + other[draw(st.integers(0, len(other))):]
    if kind == "garbage":
        return base[:at] + draw(st.binary(min_size=1, max_size=64)) + base[at:]
    if kind == "huge_line":
        unit = draw(st.sampled_from([b"x", b"{", b"[", b"{'loss': 1, ", b"a: 1 | ", b","]))
        return base[:at] + unit * (300_000 // len(unit)) + b"\n" + base[at:]
    if kind == "deep":
        depth = draw(st.sampled_from([150, 250, 1_000, 100_000]))
        opener = draw(st.sampled_from([b"[", b"{\"a\": ", b"{'loss': "]))
        return base[:at] + opener * depth + b"1" + b"]" * depth + base[at:]
    if kind == "template":  # on a line of its own, as a printed chat template is
        return base[:at] + b"\n" + draw(st.sampled_from(TEMPLATES)) + b"\n" + base[at:]
    if kind == "flip":
        flipped = bytearray(base)
        for _ in range(draw(st.integers(1, 16))):
            if flipped:
                i = draw(st.integers(0, len(flipped) - 1))
                flipped[i] = draw(st.integers(0, 255))
        return bytes(flipped)
    return base


ANY_BYTES = st.binary(max_size=4096)
