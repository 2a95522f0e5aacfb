"""Bodies of the report API, as both ends see them: the server validates requests with these
models, and the worker (or any reporting script) builds its requests and reads the replies with
the same ones, so the two cannot drift apart.

Endpoints (``/api/runs/{id}/...``, bearer: the claim ticket for ``claim``, else the run token):
``claim`` (``StartedIn`` -> ``ClaimOut``; ``GET``: -> ``Claimable``, the same check spending
nothing), ``metrics`` (``MetricBatch`` -> ``IngestReply``; an
empty batch is a heartbeat), ``control`` (-> ``ControlOut``), ``finished`` (``FinishedIn`` ->
``ControlOut``), ``logs`` (``LogBatch`` -> ``LogReply``: the training child's output and stage).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from grpodeck.contract.alerts import AlertRules
from grpodeck.contract.fields import CleanText, FiniteOrNull, Key, Text
from grpodeck.contract.limits import MAX_ROLLOUT_STEPS, MAX_ROWS, MAX_STEP, MAX_STORED_TEXT

# --- metrics -------------------------------------------------------------------------------------
# A value may be a number (NaN and +-inf included: JSON's NaN/Infinity, and 1e400, which JSON
# parsers read as inf, are stored as non-finite points) or a numeric string ("nan", "0.5").
MetricValue = float | int | Text(1_000) | None


class MetricRow(BaseModel):
    step: int = Field(ge=0, lt=MAX_STEP, description="the trainer's global step, below 2**31")
    metrics: dict[Key(1_000), MetricValue] = Field(
        max_length=2_000, description="metric name -> value; names past 200 characters are cut")


# --- rollouts (captured groups ride in the metric batches) ----------------------------------------
class Completion(BaseModel):
    # What a database cannot store (NUL, lone surrogates) is replaced, and text past
    # MAX_STORED_TEXT characters is cut (the worker sends at most MAX_TEXT_CHARS).
    text: CleanText(MAX_STORED_TEXT)
    rewards: dict[Text(200), FiniteOrNull] = Field(default_factory=dict, max_length=64)
    total: FiniteOrNull = None
    advantage: FiniteOrNull = None
    length: int | None = Field(None, ge=0, lt=MAX_STEP)  # tokens; unknown for imported parquet
    truncated: bool | None = None
    # Why a reward scored low ("timeout", "no code found"): model output and error text, so
    # cleaned and cut like the completion itself.
    reasons: dict[Text(200), CleanText(500)] = Field(default_factory=dict, max_length=64)


class Group(BaseModel):
    index: int = Field(ge=0, lt=MAX_STEP)
    prompt: CleanText(MAX_STORED_TEXT)
    completions: list[Completion] = Field(min_length=1, max_length=512)


def _distinct_indices(groups: list[Group]) -> list[Group]:
    """A group is stored under (run, step, index): two groups of one step under one index would
    collide in the store (a PostgreSQL 500, found by the API fuzzer), so the step is refused."""
    seen: set[int] = set()
    for group in groups:
        if group.index in seen:
            raise ValueError(f"group index {group.index} appears twice in one step")
        seen.add(group.index)
    return groups


class RolloutStep(BaseModel):
    step: int = Field(ge=0, lt=MAX_STEP)
    groups: Annotated[list[Group], AfterValidator(_distinct_indices)] = Field(max_length=256)


class MetricBatch(BaseModel):
    rows: list[MetricRow] = Field(default_factory=list, max_length=MAX_ROWS)
    rollouts: list[RolloutStep] = Field(default_factory=list, max_length=MAX_ROLLOUT_STEPS)


class IngestReply(BaseModel):
    accepted: int
    stop: bool
    reason: str | None = None


# --- the run's life: claim, control, finished ----------------------------------------------------
class StartedIn(BaseModel):
    pid: int | None = Field(None, ge=0, lt=2**31, description="a process id (pid_t)")
    host: CleanText(255) | None = None


class FinishedIn(BaseModel):
    returncode: int = Field(ge=-(2**31), lt=2**31, description="an exit status or -signal")
    error: CleanText(16_000) | None = None
    traceback_tail: CleanText(64_000, keep_tail=True) | None = None


class ControlOut(BaseModel):
    stop: bool
    reason: str | None = None
    status: str


class Claimable(BaseModel):
    """``GET claim``: a claim with this ticket would succeed now (otherwise the claim's 401 or
    409). A worker waiting for a device slot asks before and while it waits."""

    claimable: Literal[True] = True


class ClaimOut(ControlOut):
    token: str
    # signs the rank lines the supervisor ships (``log_markers.sign``); kept from the child
    marker_key: str | None = None


# --- the training child's output and stage ------------------------------------------------------
# The child prints ``STAGE_PREFIX + stage`` on a line of its stdout as it moves on; the worker
# reads its output files, ships new bytes as chunks (keyed by stream and byte offset, so a resent
# chunk overwrites itself) with the latest stage it saw. "training" needs no line: the server
# knows a step arrived.
STAGE_PREFIX = "[grpodeck] stage: "
# "evaluating" comes with its progress ("evaluating 3/12": batches done of the eval set's), and
# "training" follows it (back to steps); before the first evaluation, "training" needs no line.
Stage = Literal["loading_model", "first_step", "evaluating", "training", "saving"]
STAGES: tuple[str, ...] = ("loading_model", "first_step", "evaluating", "training", "saving")


class EvalProgress(BaseModel):
    """Batches of the eval set done so far, of how many (0 of n as it starts)."""
    done: int = Field(ge=0, lt=2**31)
    total: int = Field(ge=1, lt=2**31)


def stage_line(stage: str, progress: tuple[int, int] | None = None) -> str:
    """The stdout line the child prints (``evaluating 3/12`` with progress)."""
    return STAGE_PREFIX + stage + (f" {progress[0]}/{progress[1]}" if progress else "")


def parse_stage_line(line: str) -> tuple[str, EvalProgress | None] | None:
    """(stage, eval progress) from a line of the child's stdout; None for any other line or an
    unknown stage (the child's stdout also carries user code's prints)."""
    if not line.startswith(STAGE_PREFIX):
        return None
    name, _, rest = line[len(STAGE_PREFIX):].strip().partition(" ")
    if name not in STAGES:
        return None
    done, slash, total = rest.partition("/")
    if name == "evaluating" and slash and done.isdigit() and total.isdigit() and int(total) > 0:
        return name, EvalProgress(done=min(int(done), int(total)), total=int(total))
    return name, None
MAX_LOG_CHUNK = 65_536  # characters of one chunk


class LogChunk(BaseModel):
    stream: Literal["stdout", "stderr", "markers"]  # markers: signed rank lines (log_markers)
    offset: int = Field(ge=0, lt=2**62, description="byte offset of this text in its stream")
    text: CleanText(MAX_LOG_CHUNK)


class LogBatch(BaseModel):
    chunks: list[LogChunk] = Field(default_factory=list, max_length=16)
    stage: Stage | None = None
    eval_progress: EvalProgress | None = None  # with stage "evaluating"


class LogReply(BaseModel):
    stored: int


# --- runs trained elsewhere (a user's own script, the DeckCallback) ------------------------------
# Spec keys the server's diagnostics read; when present they must have these types, so a typo in
# a hand-written body is a 422 naming the key rather than a finding computed from a string.
_TYPED_SPEC_KEYS: dict[str, type | tuple[type, ...]] = {
    "max_completion_length": int, "num_generations": int, "logging_steps": int,
    "max_steps": int, "beta": (int, float), "stop_on_critical": bool}
# Finite only: the spec is stored as JSON, which has no NaN/inf (PostgreSQL refuses the token)
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
SpecValue = (FiniteFloat | int | bool | Text(4_000)
             | list[FiniteFloat | int | bool | Text(1_000) | None] | None)


def _typed_spec(spec: dict[str, SpecValue]) -> dict[str, SpecValue]:
    for key, kind in _TYPED_SPEC_KEYS.items():
        value = spec.get(key)
        wrong_bool = isinstance(value, bool) and kind is not bool
        if value is not None and (wrong_bool or not isinstance(value, kind)):
            raise ValueError(f"spec.{key} must be {getattr(kind, '__name__', 'a number')}, "
                             f"not {type(value).__name__}")
    return spec


# The trainer vocabularies a run may name (the server's tables: app/metrics/names.py VOCABULARIES;
# "trl": TRL's names only). Left out, the server detects one from the keys the run sends.
Vocabulary = Literal["trl", "verl", "openrlhf", "loop"]  # loop: a hand-written loop's spellings
MAX_METRIC_MAP = 200


def _one_key_per_name(mapping: dict[str, str] | None) -> dict[str, str] | None:
    """A user mapping whose every key and name says something and whose names are distinct:
    two keys read as one name would overwrite each other's points at every step."""
    by_name: dict[str, str] = {}
    for key, name in (mapping or {}).items():
        if not key.strip() or not name.strip():
            raise ValueError(f"{key!r}: {name!r}: a metric_map key and name cannot be blank")
        if (other := by_name.setdefault(name.strip(), key)) != key:
            raise ValueError(f"{other!r} and {key!r} both map to {name.strip()!r}: a name "
                             "takes one key")
    return mapping


class ExternalRunIn(BaseModel):
    """``POST /api/runs`` for a run trained outside the Deck: nothing is queued; the reply's
    token is the run token the report endpoints take (metrics, control, finished)."""
    model_config = {"extra": "forbid"}

    source: Literal["external"]
    name: Text(120, min_length=1)
    # The training config as flat JSON (a GRPOConfig's to_dict): scalars and short lists.
    spec: Annotated[dict[Text(200), SpecValue], Field(max_length=1_000),
                    AfterValidator(_typed_spec)] = Field(default_factory=dict)
    # What the launch form sets for a launched run: checked by the same rules (tags as the runs
    # list's, alert destinations by the outbound URL policy), 422 naming the field otherwise.
    tags: list[Text(40)] = Field(default_factory=list, max_length=16)
    group: Text(33, min_length=1) | None = Field(
        None, description="runs reported together (one experiment); stored as tag group:NAME")
    alerts: AlertRules | None = None
    # How the run's metric keys are read (both optional; an older server refuses them, so a
    # client leaves them out unless asked): the user's key -> canonical name mapping, applied
    # to every batch on top of the trainer vocabulary (detected unless named here).
    metric_map: Annotated[dict[Text(1_000), Text(200)], Field(max_length=MAX_METRIC_MAP),
                          AfterValidator(_one_key_per_name)] | None = Field(
        None, description="log key -> canonical name, e.g. {\"mean_reward\": \"reward\"}")
    vocabulary: Vocabulary | None = Field(
        None, description="the trainer whose names the run sends; detected when left out")


class ExternalRunOut(BaseModel):
    id: int
    token: str
    url: str
