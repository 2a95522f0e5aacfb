"""Console lines of ``key: value`` / ``key=value`` pairs: verl's and hand-written loops'.

verl's console logger prints one line per step, ``step:N - key:value - key:value ...``
(``verl.utils.tracking``), values through ``pprint`` (so ``np.float64(0.5)`` with numpy 2);
under Ray each line carries a ``(TaskRunner pid=...)`` prefix and often ANSI colour codes.
A hand-written loop prints its own shape, e.g. ``Step 12 | Reward: 0.53 | KL_ref: 0.012``,
or ``GRPO step 12/500 | loss: 0.1 | mean_reward: 0.5 | KL: 0.01``; its spellings are read
through the ``loop`` vocabulary of ``app.metrics.names``. A list of one group's rewards,
``Rewards: [0.1, 0.9, 0.9, 0.1]``, becomes that key's mean and its spread, ``<key>_std``
(the sample standard deviation, as TRL computes ``reward_std``; 0 when all are equal, which
is what the zero-spread check looks for).

Both become rows the same way: every ``key<sep>number`` pair on a line. The step is the
line's ``step``/``global_step``/``iter`` pair, or ``Step N`` written without a separator; when
some lines carry a step, a line without one belongs to the step printed above it, and lines
before the first step (a config echo) are ignored; when none does, the n-th metric line is
step n (``meta['step_inference'] = 'line'``).
"""

from __future__ import annotations

import math
import re
import statistics

from app.importers.base import ImportedLog, LogFormatError, merge_rows

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RAY_PREFIX = re.compile(r"^\s*\(\w+(?: pid=\d+)?(?:, ip=[\w.:]+)?\)\s*")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity)"
# ``np.float64(0.5)``, ``tensor(0.5)``, ``tensor(0.5, device='cuda:0')`` print around a number
PAIR = re.compile(
    r"(?<![\w/@.\-])(?P<key>[A-Za-z_][\w/@.\-]*?)\s*[:=]\s*"
    r"(?P<wrap>(?:np\.)?(?:float|int)\d*\(|tensor\()?(?P<value>" + NUMBER + r")"
    r"(?(wrap)(?:,[^)]*)?\)|)(?=$|[\s,;|)\]}])", re.IGNORECASE)
BARE_STEP = re.compile(r"\b(?:global[_ ]step|step|iter(?:ation)?)\s+(\d+)\b", re.IGNORECASE)
STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration", "train/global_step"})
VERL_LINE = re.compile(r"^step:\d+ - [^\s:]+:")
LIST = re.compile(r"(?<![\w/@.\-])(?P<key>[A-Za-z_][\w/@.\-]*?)\s*[:=]\s*"
                  r"\[(?P<items>[-+\w.,\s]{1,100000}?)\]")
MIN_LINES = 2  # one line of pairs is a config echo, not a training log
MAX_LINE = 100_000  # a longer line is no metrics print (and regexes on it cost too much)


def clean(line: str) -> str:
    """A console line without colour codes and without Ray's ``(Actor pid=...)`` prefix."""
    return RAY_PREFIX.sub("", ANSI.sub("", line)).strip()


def pairs(line: str) -> dict[str, str]:
    """Every ``key<sep>number`` pair of one cleaned line (the last of a repeated key wins),
    and for each ``key: [numbers]`` list, ``key`` (its mean) and ``key_std`` (its spread)."""
    found = {m.group("key"): m.group("value") for m in PAIR.finditer(line)}
    for m in LIST.finditer(line):
        summary = _list_summary(m.group("items"))
        if summary is not None:
            found[m.group("key")], found[m.group("key") + "_std"] = summary
    return found


def _list_summary(items: str) -> tuple[str, str] | None:
    """(mean, sample standard deviation) of a printed list of finite numbers, as text like
    the other values; None when an item is not a number."""
    try:
        values = [float(v) for v in items.replace(",", " ").split()]
    except ValueError:
        return None
    if not values or not all(math.isfinite(v) for v in values):
        return None
    try:
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        return repr(statistics.fmean(values)), repr(spread)
    except (ValueError, OverflowError):  # numbers near 1e308 overflow their sum
        return None


def _step(found: dict[str, str], line: str) -> int | None:
    for key, value in found.items():
        if key.lower() in STEP_KEYS:
            try:
                return int(float(value))
            except (ValueError, OverflowError):
                return None
    bare = BARE_STEP.search(line)
    return int(bare.group(1)) if bare else None


def _lines(text: str) -> list[tuple[int | None, dict[str, str]]]:
    """(step or None, pairs without the step) for each line with at least one metric pair."""
    out = []
    for raw in re.split(r"[\r\n]", text):
        if len(raw) > MAX_LINE:
            continue
        line = clean(raw)
        found = pairs(line)
        if not found:
            continue
        step = _step(found, line)
        metrics = {k: v for k, v in found.items() if k.lower() not in STEP_KEYS}
        if metrics:
            out.append((step, metrics))
    return out


def _continued(lines: list[tuple[int | None, dict[str, str]]]) -> list[tuple[int, dict[str, str]]]:
    """Stepped lines, each followed by the step-less lines printed after it (a loop's
    ``Rewards: [...]`` on a line of its own belongs to the step above it); step-less lines
    before the first step (a config echo) are left out."""
    out: list[tuple[int, dict[str, str]]] = []
    current: int | None = None
    for step, metrics in lines:
        current = step if step is not None else current
        if current is not None:
            out.append((current, metrics))
    return out


def looks_like_verl(text: str) -> bool:
    """Some line (cleaned) starts ``step:N - key:value``: verl's console logger."""
    return any(VERL_LINE.match(clean(line)) for line in text[:2_000_000].splitlines())


def looks_like(text: str) -> bool:
    """At least ``MIN_LINES`` lines hold ``key: number`` or ``key=number`` pairs."""
    return len(_lines(text[:2_000_000])) >= MIN_LINES


def parse(text: str, path: str, *, verl: bool = False) -> ImportedLog:
    """Rows from the pair lines; see the module docstring for how steps are found."""
    lines = _lines(text)
    if verl:
        lines = [(s, m) for s, m in lines if s is not None]
    stepped = _continued(lines)
    if stepped:
        rows, how = stepped, "step"
    else:
        rows, how = [(i, m) for i, (_, m) in enumerate(lines, 1)], "line"
    if not rows:
        raise LogFormatError(path, "no lines of key: value pairs found")
    fmt = "verl_console" if verl else "key_value"
    return ImportedLog(rows=merge_rows([(int(s), m) for s, m in rows]), source_format=fmt,
                       meta={"step_inference": how})
