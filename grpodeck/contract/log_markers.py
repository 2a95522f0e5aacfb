"""Marker lines the worker writes into a run's log for the run page's Devices panel (issue 26).

Why markers in the log and not new report fields: the log already travels (``LogBatch``), is
kept with the run, and needs no table; both ends build and read the lines here, so they cannot
drift apart. What each marker is worth:

- the supervisor's preamble (``slot_line``, ``launch_line``) is written at the very start of
  the run's stdout *before the training child starts*, for people, and the same lines with
  ``PREAMBLE_END`` after them to the markers file, which the supervisor ships (signed, below)
  before it starts the child; the panel believes only that signed preamble (``parse_vouched``).
  Issue 55: it believed stdout's opening lines, which are the child's own on a worker without
  device slots, the user's script's on an outside run, and whatever a token holder posts at
  offset 0;
- rank lines (``rank_line``, ``rank_failed_line``) are written by the training ranks to stderr
  (plain log text, for people) and to the run's markers file (``MARKERS_ENV``). Only the
  supervisor ships that file, as the ``markers`` stream, each line signed with the run's marker
  key (``sign``): the server made the key at the claim and handed it to the supervisor alone,
  never to the training child's environment. The panel believes a line only when its signature
  verifies (``verified``), matches exactly, names a rank below the run's process count, and its
  world size is the run's. Issue 33: a ``[grpodeck] rank ...`` line printed by user code (a
  reward, a model's completion) was believed ("8x H100", rank 0 at step 999); now it is plain
  log text, and a token holder posting its own ``markers`` chunk cannot sign it. (Code running
  inside a rank could still append to the markers file itself: the channel keeps out what is
  printed, not a program that sets out to write there.)
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

PREFIX = "[grpodeck] "
_SLOT = re.compile(r"\[grpodeck\] device slot (\d{1,4}): CUDA_VISIBLE_DEVICES=([0-9A-Za-z,:-]{1,200})")
_LAUNCH = re.compile(r"\[grpodeck\] (\d{1,4}) processes, ([a-z0-9_]{1,20}), on (.{1,500})")
_RANK = re.compile(r"\[grpodeck\] rank (\d{1,4})/(\d{1,4}): (?:step (\d{1,10}) done(, stopping)?"
                   r"|(failed))")
PREAMBLE_LINES = 2  # the slot line, then the launch line (either may be missing)
PREAMBLE_END = f"{PREFIX}preamble end\n"  # closes the supervisor's preamble in the markers file
MARKERS_STREAM = "markers"  # the log stream of the signed rank lines
MARKERS_FILE = "markers.log"  # in the run folder: where the ranks write them
MARKERS_ENV = "GRPODECK_MARKERS_FILE"  # its path, for the ranks (a path, not a secret)
_SIGNED = re.compile(r"(.{1,200}) ~([0-9a-f]{32})")


def _mac(key: str, line: str) -> str:
    return hmac.new(key.encode(), line.encode(), hashlib.sha256).hexdigest()[:32]


def sign(key: str, text: str) -> str:
    """Each whole line of ``text`` with its signature under the run's marker key appended."""
    return "".join(f"{line} ~{_mac(key, line)}\n" for line in text.splitlines() if line)


def verified(text: str, key: str | None) -> str:
    """The lines of ``text`` whose signature verifies under ``key``, signatures removed; none
    without a key (a run claimed before markers were signed shows no rank progress)."""
    if not key:
        return ""
    out = []
    for line in text.splitlines():
        m = _SIGNED.fullmatch(line)
        if m and hmac.compare_digest(m[2], _mac(key, m[1])):
            out.append(m[1] + "\n")
    return "".join(out)


def slot_line(index: int, visible: str) -> str:
    """The supervisor's first stdout line on a worker with device slots (``index`` from 0)."""
    return f"{PREFIX}device slot {index + 1}: CUDA_VISIBLE_DEVICES={visible}\n"


def launch_line(processes: int, distributed: str, devices: str) -> str:
    return f"{PREFIX}{processes} processes, {distributed}, on {devices}\n"


def rank_line(rank: int, world: int, step: int, stopping: bool = False) -> str:
    return f"{PREFIX}rank {rank}/{world}: step {step} done{', stopping' if stopping else ''}\n"


def rank_failed_line(rank: int, world: int) -> str:
    return f"{PREFIX}rank {rank}/{world}: failed\n"


@dataclass(frozen=True)
class Preamble:
    slot: int | None = None  # 1-based, as the log says it
    visible: str | None = None  # CUDA_VISIBLE_DEVICES of the slot
    processes: int | None = None
    distributed: str | None = None
    devices: str | None = None  # the worker's device names ("NVIDIA H200, NVIDIA H200", "cpu")


def _leading(opening: str) -> tuple[Preamble, str]:
    """(the preamble at the start of ``opening``, the text of its lines)."""
    found: dict[str, object] = {}
    kept: list[str] = []
    for line in opening.split("\n", PREAMBLE_LINES)[:PREAMBLE_LINES]:
        if "slot" not in found and not found and (m := _SLOT.fullmatch(line)):
            found.update(slot=int(m[1]), visible=m[2])
        elif "processes" not in found and (m := _LAUNCH.fullmatch(line)):
            found.update(processes=int(m[1]), distributed=m[2], devices=m[3])
        else:
            break  # the child's output begins: nothing after it is the supervisor's
        kept.append(line + "\n")
    return Preamble(**found), "".join(kept)  # type: ignore[arg-type]


def parse_preamble(opening: str) -> Preamble:
    """The supervisor's lines at the start of stdout (the text of the chunk at offset 0)."""
    return _leading(opening)[0]


def preamble_lines(opening: str) -> str:
    """The preamble lines at the start of what the supervisor wrote to stdout, as written: what
    it vouches for in the markers file (with ``PREAMBLE_END`` after them)."""
    return _leading(opening)[1]


def parse_vouched(markers: str) -> Preamble:
    """The preamble from the verified opening of the markers stream: the lines before the first
    ``PREAMBLE_END``; nothing without that line (an older worker's run, or lines a rank
    appended after it)."""
    head, end, _ = markers.partition(PREAMBLE_END)
    return parse_preamble(head) if end else Preamble()


@dataclass
class RankState:
    step: int | None = None  # the latest step this rank said it finished
    stopping: bool = False
    failed: bool = False


def parse_ranks(stderr: str, world: int, shown: int = 64) -> dict[int, RankState]:
    """The latest state of each of the first ``shown`` ranks from the ranks' stderr; lines of
    another shape or world size, or of a rank out of range, are ignored (a partial first line
    of a tail included)."""
    ranks = {r: RankState() for r in range(min(world, shown))}
    for line in stderr.splitlines():
        if not line.startswith(PREFIX) or not (m := _RANK.fullmatch(line)):
            continue
        rank, size = int(m[1]), int(m[2])
        if size != world or rank not in ranks:
            continue
        state = ranks[rank]
        if m[5]:
            state.failed = True
        elif state.step is None or int(m[3]) >= state.step:
            state.step, state.stopping = int(m[3]), bool(m[4])
    return ranks
