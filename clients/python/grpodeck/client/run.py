"""A tracker for any training loop: ``run = grpodeck.client.init(url=..., name=...)``,
``run.log({...}, step=N)``, ``run.finish()``. PyTorch loops, verl, OpenRLHF or a notebook report
the way a TRL script does with ``DeckCallback``, which is itself a thin user of ``Run``.

The training thread only enqueues: rows and rollouts go through the same ``Sender``
(background thread, disk spool, exactly-once delivery) as every other reporter, into the run's
own spool folder (``grpodeck.client.rundir``). Registering (``POST /api/runs``, source
external) and finishing wait on the network; nothing in between does.

Reporting never breaks training unless asked, and never loses what was logged: a Deck that
cannot be reached at ``init`` is a warning, the run is spooled locally (its definition, rows
and rollouts, in step order with their time stamps) and the sender thread registers it when
the Deck answers (it asks every few seconds while nothing answers, never blocking ``log``),
then delivers everything. A process that ends first leaves the folder for
``grpodeck-client sync DIR``; ``finish`` prints one line saying what was not delivered and
that command. A Deck that refuses the key (401/403) is not retried (the folder waits for
``sync`` with the right key). ``strict=True`` raises ``DeckUnavailable`` instead (at ``init``,
before any step is spent). Options the server refuses (a bad tag, an alert destination the
outbound policy forbids: 422) always raise ``DeckRefused``, naming the field.

Nor does the client hurt the training it serves when its own machine has a bad day (issue
55): a spool folder that cannot be created (under a regular file, a read-only or full disk)
is one warning and the run is reported from memory; a disk that fills up during the run is one
warning and what waits moves to memory, still sent; ``finish`` with the Deck down returns
within seconds (``FINISH_PATIENCE`` without a delivery), unless asked to wait longer
(``finish(timeout=S)`` or ``$GRPODECK_FINISH_TIMEOUT``). Only ``strict=True`` raises, at
``init``, when the spool folder cannot be created.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from grpodeck.client.rundir import RunDir
from grpodeck.client.sender import RetryLater, Sender, Target
from grpodeck.client.system import SystemSampler, start_sampler
from grpodeck.contract.alerts import AlertRules
from grpodeck.contract.artifacts import ArtifactOut
from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut, Vocabulary

log = logging.getLogger("grpodeck.client")

URL_ENVS = ("GRPODECK_URL", "GRPO_DECK_URL")  # the second: the name DeckCallback first read
KEY_ENV = "GRPODECK_API_KEY"
GUARD_RAIL_PREFIX = "stopped by diagnostics: "  # the server's stop reason for its guard rail
FINISH_ENV = "GRPODECK_FINISH_TIMEOUT"  # seconds finish waits, whatever the Deck does
FINISH_PATIENCE = 5.0  # by default finish gives up after this long with nothing delivered
MAX_FINISH_WAIT = 86_400.0  # a timeout past a day (or inf) waits a day


class DeckUnavailable(RuntimeError):
    """``strict=True`` and the Deck could not be reached or refused the credentials."""


class CredentialsRefused(DeckUnavailable):
    """The Deck refused the API key (401/403): trying again with the same key cannot help."""


class DeckRefused(ValueError):
    """The Deck refused the run's options (422): the message names the field and why."""


def env_url(url: str | None) -> str:
    """``url``, else ``$GRPODECK_URL`` (or the older ``$GRPO_DECK_URL``), without a final /."""
    found = url or next((os.environ[k] for k in URL_ENVS if os.environ.get(k)), "")
    return found.rstrip("/")


def encode_value(value: Any) -> float | str | None:
    """A JSON-safe metric value (non-finite as "nan"/"inf"/"-inf"), or None for a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy / torch scalars
            value = float(value.item())  # type: ignore[union-attr]
        except (AttributeError, TypeError, ValueError):
            return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


# A log dict's keys -> whether they are all str train names (no "eval_"): a trainer logs the
# same keys every step, and converting value by value was most of ``log``'s time (issue 57).
_TRAIN_KEYS: dict[tuple[Any, ...], bool] = {}
_MAX_KEY_SETS = 1_000
_FLOAT = {float}


def rows_from_logs(step: int, logs: dict[str, Any]) -> list[dict[str, Any]]:
    """One log dict as a train row and an eval row (each only if non-empty)."""
    values = logs.values()
    if set(map(type, values)) == _FLOAT and math.isfinite(sum(values)):  # C loops only
        keys = tuple(logs)
        plain = _TRAIN_KEYS.get(keys)
        if plain is None:
            plain = all(type(k) is str and not k.startswith("eval_") for k in keys)
            if len(_TRAIN_KEYS) < _MAX_KEY_SETS:
                _TRAIN_KEYS[keys] = plain
        if plain:
            return [{"step": step, "metrics": dict(logs)}]
    train: dict[str, Any] = {}
    evals: dict[str, Any] = {}
    for name, raw in logs.items():
        value = encode_value(raw)
        if value is not None and isinstance(name, str):  # the Deck drops other keys too
            (evals if name.startswith("eval_") else train)[name] = value
    return [{"step": step, "metrics": m} for m in (train, evals) if m]


def stamped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the client's time (Unix seconds) as ``time``: kept in the spool with the row,
    so a run delivered later still says when each step happened (the Deck ignores it today)."""
    now = round(time.time(), 3)
    return [{**row, "time": now} for row in rows]


def config_value(value: Any) -> Any:
    """A config value as the contract's flat JSON spec holds it (None: leave it out)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value if not isinstance(value, str) or len(value) <= 4_000 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str))
                                                 or v is None for v in value):
        return [v if not isinstance(v, str) else v[:1_000] for v in value][:1_000]
    return str(value)[:4_000] if isinstance(value, os.PathLike) else None


def flat_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """What of ``config`` the spec can hold: nested dicts flattened as ``a.b``, secrets left out
    (names holding "token", "key" or "password" stay on the node)."""
    out: dict[str, Any] = {}
    for key, raw in (config or {}).items():
        if isinstance(raw, dict):
            out.update({f"{key}.{k}": v for k, v in flat_config(raw).items()})
            continue
        value = config_value(raw)
        if value is not None and not any(s in str(key).lower()
                                         for s in ("token", "api_key", "password")):
            out[str(key)[:200]] = value
    return out


def stopped_reason(stop: bool, reason: str | None, run_over: bool) -> str | None:
    """Why the Deck stopped this run: "cancelled", "guard_rail: <finding>", or None."""
    if reason and reason.startswith(GUARD_RAIL_PREFIX):
        return "guard_rail: " + reason[len(GUARD_RAIL_PREFIX):]
    if stop or run_over:
        return "cancelled" if not reason or "cancel" in reason else reason
    return None


class Run:
    """One run reporting to GRPO Deck (see ``init``). Until the Deck registers it (it did not
    answer at ``init``) everything logged waits in ``spool`` and ``id`` is None; a loop never
    needs to check."""

    def __init__(self, url: str, name: str, info: ExternalRunOut | None,
                 sender: Sender | None, finish_deadline: float,
                 sampler: SystemSampler | None = None, spool: RunDir | None = None) -> None:
        self.url, self.name, self.info, self.sender = url, name, info, sender
        self.sampler = sampler
        self.spool = spool
        self._late_id: int | None = None  # a late registration's id, after finish
        self.finish_deadline = finish_deadline
        self.status: str | None = None  # the final status, once finished
        self._step = -1
        self._stopped: str | None = None

    @property
    def id(self) -> int | None:
        """The Deck's run id; None while the run is not registered."""
        if self.info is not None:
            return self.info.id
        sender = self.sender
        if sender is not None and sender.target is not None:
            return int(sender.target.run_id)  # registered late, by the sender thread
        return self._late_id

    @property
    def should_stop(self) -> bool:
        """True once the Deck asked this run to stop (a cancel, the guard rail) or ended it."""
        return self.sender is not None and self.sender.state.stop

    @property
    def stopped_reason(self) -> str | None:
        """"cancelled", "guard_rail: <finding>", or None while nobody stopped the run."""
        if self.sender is None:
            return self._stopped
        state = self.sender.state
        return stopped_reason(state.stop, state.stop_reason, state.run_over)

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Queue one step's metrics (never waits on the network). ``step`` defaults to one past
        the last; names starting ``eval_`` go to the eval row; non-numbers are left out."""
        self._step = self._step + 1 if step is None else int(step)
        if self.sampler is not None:  # the step its samples carry; tokens/s for this row
            metrics = {**metrics, **self.sampler.note(self._step, metrics)}
        if self.sender is not None:
            self.sender.put_rows(stamped(rows_from_logs(self._step, metrics)))

    def log_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        """Queue sampled groups for ``step`` (the shape of ``grpodeck.contract.wire.Group``:
        ``{"index", "prompt", "completions": [{"text", "rewards", "advantage"}...]}``)."""
        if self.sender is not None:
            self.sender.put_rollouts(step, groups)

    def log_artifact(self, path: str | Path, *, kind: str = "file", step: int | None = None,
                     name: str | None = None) -> ArtifactOut | None:
        """Upload a file, or a folder (as ``NAME.tar``), to the run's Artifacts tab: ``kind``
        "checkpoint", "model", "trainer_state" or "file"; ``step`` the step it was saved at.
        Waits for the upload (streamed, never read whole into memory). A bad name or a refusal
        (too large: 413) raises ``ArtifactError``; an unreachable Deck is a warning and None.
        Only uploads: a path on this machine means nothing to the server."""
        if self.sender is None or self.sender.target is None:
            if self.sender is not None:
                log.warning("grpodeck: %s was not uploaded: the run is not registered yet", path)
            return None
        from grpodeck.client.artifacts import ArtifactError, packed, send

        target = self.sender.target
        with packed(Path(path), name) as (file, artifact_name), httpx.Client(
                base_url=target.base_url, timeout=60.0,
                headers={"Authorization": f"Bearer {target.token}"}) as http:
            try:
                return send(http, int(target.run_id), file, artifact_name, kind, step)
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code < 500:
                    raise ArtifactError(f"GRPO Deck refused {artifact_name} "
                                        f"({exc.response.status_code}): {_detail(exc.response)}"
                                        ) from None
                log.warning("grpodeck: %s was not uploaded: %s", artifact_name, exc)
            except httpx.TransportError as exc:
                log.warning("grpodeck: %s was not uploaded: %s", artifact_name, exc)
        return None

    def finish(self, status: str = "succeeded", error: str | None = None, *,
               timeout: float | None = None) -> str | None:
        """Deliver what is queued and spooled, then end the run: ``status`` "succeeded" or
        "failed" (with ``error``). The Deck's final status (a run it stopped ends "cancelled"),
        or None when it never heard.

        By default it waits while the Deck takes what is left (at most ``finish_deadline`` s)
        and gives up after ``FINISH_PATIENCE`` s in which nothing was delivered: the end of a
        script must not hang on a Deck that is down (what is left stays in the spool, and the
        line printed says how to sync it). ``timeout`` (or ``$GRPODECK_FINISH_TIMEOUT``): wait
        up to that many seconds however the Deck answers (a Deck known to be restarting)."""
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.close()  # its last sample goes out with the rest
        sender, self.sender = self.sender, None
        if sender is None:
            return self.status
        deadline, stall = finish_wait(timeout, self.finish_deadline, sender.timeout)
        start = time.monotonic()
        delivered = sender.close(deadline, stall)
        self._late_id = int(sender.target.run_id) if sender.target is not None else None
        state = sender.state
        self._stopped = stopped_reason(state.stop, state.stop_reason, state.run_over)
        failed = status != "succeeded"
        code, why = (1 if failed else 0), ((error or status)[:4_000] if failed else None)
        spool = self.spool  # finished.json: for `grpodeck-client sync` if not sent here
        saved = spool is not None and kept("finished.json", lambda: spool.save_finish(code, why))
        if delivered and not state.run_over:  # else `sync` ends it once its rows are in
            left = stall if stall is not None else deadline - (time.monotonic() - start)
            self.status = sender.finish(code, why, deadline=left)
            if self.status and saved:
                kept("finished.json", lambda: spool.save_finish(code, why, sent=True))
            print(f"GRPO Deck: run {sender.target.run_id if sender.target else '?'} ended "
                  f"{self.status or 'unreported'}", file=sys.stderr, flush=True)
        line = undelivered_line(sender, self.spool)
        if line:
            print(line, file=sys.stderr, flush=True)
        sender.shutdown()
        return self.status

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """An exception ends the run failed, with its message; the exception goes on."""
        if exc is None:
            self.finish()
        else:
            self.finish("failed", f"{kind.__name__ if kind else 'Error'}: {exc}")


def finish_wait(timeout: float | None, deadline: float,
                post_timeout: float) -> tuple[float, float | None]:
    """How long ``finish`` waits: (at most, giving up after that long without a delivery or
    None). An explicit ``timeout`` (or ``$GRPODECK_FINISH_TIMEOUT``) is waited out whatever
    the Deck does; by default the patience applies within ``deadline``, and is never shorter
    than one post may take (``post_timeout``: a slow Deck that is taking a batch is no
    stall)."""
    if timeout is None and os.environ.get(FINISH_ENV, "").strip():
        try:
            timeout = float(os.environ[FINISH_ENV])
        except ValueError:
            log.warning("grpodeck: $%s=%r is not a number of seconds; ignored", FINISH_ENV,
                        os.environ[FINISH_ENV])
    if timeout is None or math.isnan(timeout):
        return deadline, max(FINISH_PATIENCE, post_timeout + 1.0)
    return min(MAX_FINISH_WAIT, max(0.0, timeout)), None


def kept(what: str, write: Callable[[], None]) -> bool:
    """Write ``what`` into the spool folder; a failure (a full disk) is one warning, never an
    error in the training script."""
    try:
        write()
    except OSError as exc:
        log.warning("grpodeck: could not write %s in the spool folder (%s)", what,
                    exc.strerror or exc)
        return False
    return True


def register(url: str, body: ExternalRunIn, api_key: str | None,
             timeout: float) -> ExternalRunOut:
    """``POST /api/runs``; ``DeckRefused`` on a 422, ``DeckUnavailable`` when the Deck cannot
    be reached or refuses (401, 403, 5xx)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.post(f"{url}/api/runs", json=body.model_dump(mode="json",
                                                                       exclude_none=True),
                              headers=headers, timeout=max(timeout, 10.0))
    except httpx.HTTPError as exc:
        raise DeckUnavailable(f"GRPO Deck at {url} cannot be reached: {exc}") from exc
    if response.status_code == 422:
        raise DeckRefused(f"GRPO Deck refused the run's options: {_detail(response)}")
    if response.status_code in (401, 403):
        raise CredentialsRefused(f"GRPO Deck at {url} refused the credentials "
                              f"({response.status_code}): pass api_key= or set {KEY_ENV}")
    if response.status_code != 201:
        raise DeckUnavailable(f"GRPO Deck refused the run ({response.status_code}): "
                              f"{response.text[:500]}")
    return ExternalRunOut.model_validate(response.json())


def _detail(response: httpx.Response) -> str:
    """A 422's field errors as "body.alerts.urls.0: why; ..."."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:500]
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}"
                         for d in detail if isinstance(d, dict))[:2_000]
    return str(detail)[:2_000]


def init(url: str | None = None, name: str | None = None, *,
         config: dict[str, Any] | None = None, tags: list[str] | None = None,
         group: str | None = None, alerts: AlertRules | dict[str, Any] | None = None,
         api_key: str | None = None, strict: bool = False, stop_on_critical: bool = False,
         spool_dir: str | Path | None = None, flush_seconds: float = 2.0,
         timeout: float = 5.0, finish_deadline: float = 120.0, system_metrics: bool = True,
         system_seconds: float | None = None, metric_map: dict[str, str] | None = None,
         vocabulary: Vocabulary | None = None, rollout_spool_mb: float = 512) -> Run:
    """Register a run at ``url`` (or ``$GRPODECK_URL``) and start reporting it.

    ``config``: the hyperparameters shown on the run page (flat or nested dict of scalars);
    ``tags``/``group``: as on the runs list (the group is the tag ``group:NAME``); ``alerts``:
    the launch form's rules (``{"urls": [...], "min_severity": "warning", "ignore": [...]}``);
    ``api_key`` (or ``$GRPODECK_API_KEY``); ``stop_on_critical``: the guard rail may stop it;
    ``spool_dir``: where the run's spool folder goes (default ``./grpodeck-spool``): rows and
    rollouts wait there until delivered, the whole run when the Deck is down at ``init`` (a
    folder that cannot be created is a warning, and the run is reported from memory);
    ``finish_deadline``: the most seconds ``finish`` spends delivering what is left while the
    Deck keeps taking it (see ``Run.finish``: a Deck that takes nothing for a few seconds ends
    the wait);
    ``rollout_spool_mb``: undelivered rollouts kept on disk (past it the oldest are dropped,
    counted and reported at ``finish``);
    ``system_metrics``: sample CPU %, RSS, GPU memory/utilisation and tokens/s as ``system/*``
    every ``system_seconds`` (default ``$GRPODECK_SYSTEM_SECONDS`` or 10; see
    ``grpodeck.client.system``);
    ``metric_map``: your keys -> the Deck's names (``{"mean_reward": "reward"}``), applied by
    the server to every batch of the run, so its charts and checks read them;
    ``vocabulary``: the trainer whose names you log ("verl", "openrlhf", "trl"; by default
    the server recognises verl's and OpenRLHF's names from the first keys sent)."""
    url, name = env_url(url), name or "external run"
    try:
        rules = AlertRules.model_validate(alerts) if isinstance(alerts, dict) else alerts
        body = ExternalRunIn(source="external", name=name, tags=list(tags or []), group=group,
                             alerts=rules, spec={**flat_config(config),
                                                 "stop_on_critical": stop_on_critical},
                             metric_map=metric_map or None, vocabulary=vocabulary)
    except ValueError as exc:  # pydantic's ValidationError: the same rules the server applies
        raise DeckRefused(f"GRPO Deck would refuse the run's options: {exc}") from exc
    api_key = api_key or os.environ.get(KEY_ENV)
    spool = open_spool(Path(spool_dir) if spool_dir else Path("grpodeck-spool"), url, body,
                       strict)
    try:
        info, why, retry = first_registration(url, body, api_key, timeout, strict)
    except (DeckUnavailable, DeckRefused):
        if spool is not None:
            spool.discard()  # nothing was logged: no folder left for a later sync to register
        raise
    if info is None:
        offline_warning(why, retry, spool, url)
    elif spool is not None:
        kept("registered.json", lambda: spool.save_registration(info))
    sender = Sender(Target(url, info.id, info.token) if info else None,
                    spool.metrics_path if spool else None,
                    rollout_path=spool.rollouts_path if spool else None,
                    flush_seconds=flush_seconds, timeout=timeout,
                    rollout_spool_bytes=int(rollout_spool_mb * 2**20),
                    registrar=registrar(url, body, api_key, timeout, spool) if retry else None)
    sender.start()
    if info is not None:
        print(f"GRPO Deck: run {info.id} is live at {info.url}", file=sys.stderr, flush=True)
    return Run(url, name, info, sender, finish_deadline,
               start_sampler(sender.put_rows, system_metrics, system_seconds), spool)


def open_spool(parent: Path, url: str, body: ExternalRunIn, strict: bool) -> RunDir | None:
    """The run's spool folder under ``parent``; one that cannot be created (under a regular
    file, a read-only or full disk) is one warning and None (the run is reported from memory),
    unless ``strict``."""
    try:
        return RunDir.create(parent, url, body)
    except OSError as exc:
        if strict:
            raise
        log.warning("grpodeck: cannot create the spool folder under %s (%s); training goes on "
                    "and the run is reported from memory (what the Deck has not taken when the "
                    "process exits is lost)", parent, exc.strerror or exc)
        return None


def first_registration(url: str, body: ExternalRunIn, api_key: str | None, timeout: float,
                       strict: bool) -> tuple[ExternalRunOut | None, str, bool]:
    """The Deck's registration at ``init``; else (None, why, whether the sender should keep
    trying). ``strict``: the Deck's absence raises instead."""
    try:
        if not url:
            raise DeckUnavailable(f"no GRPO Deck url (pass url= or set {URL_ENVS[0]})")
        return register(url, body, api_key, timeout), "", False
    except DeckUnavailable as exc:
        if strict:
            raise
        return None, str(exc), bool(url) and not isinstance(exc, CredentialsRefused)


def offline_warning(why: str, retry: bool, spool: RunDir | None, url: str) -> None:
    """The one line saying the Deck did not register the run at ``init`` and what happens."""
    if retry:
        then = "registered and delivered when the Deck answers"
    elif spool is not None:
        then = f"deliver it with: {sync_command(spool, url)}"
    else:
        then = "lost when the process exits: there is no spool folder to sync"
    log.warning("grpodeck: %s; training goes on and the run is kept in %s (%s)", why,
                spool.path if spool is not None else "memory", then)


def registrar(url: str, body: ExternalRunIn, api_key: str | None, timeout: float,
              spool: RunDir | None) -> Callable[[], Target]:
    """What the sender thread calls until the Deck registers the run (see ``Sender``)."""
    def attempt() -> Target:
        try:
            info = register(url, body, api_key, timeout)
        except CredentialsRefused as exc:
            raise ValueError(str(exc)) from None  # give up: `sync` with the right key
        except DeckUnavailable as exc:  # a cause: no answer at all (see ``register``)
            raise RetryLater(str(exc), answered=exc.__cause__ is None) from None
        if spool is not None:
            kept("registered.json", lambda: spool.save_registration(info))
        print(f"GRPO Deck: run {info.id} is live at {info.url} (registered once the Deck "
              "answered; sending what was kept)", file=sys.stderr, flush=True)
        return Target(url, info.id, info.token)
    return attempt


def sync_command(spool: RunDir, url: str | None = None) -> str:
    """The command that delivers ``spool`` (with ``--url`` when it holds no address)."""
    if url is None:
        try:
            url = spool.definition()[0]
        except ValueError:
            url = ""
    return f"grpodeck-client sync {shlex.quote(str(spool.path))}" + ("" if url else " --url URL")


def undelivered_line(sender: Sender, spool: RunDir | None) -> str | None:
    """One line saying what did not reach the Deck and how to deliver it; None when all did."""
    state, parts = sender.state, []
    rows, steps = sender.pending(), sender.rollouts.pending()
    if rows or steps:
        parts.append(f"{rows} rows and {steps} rollout steps were not delivered"
                     + ("" if sender.target else " (the run is not registered: "
                        f"{state.not_registered or state.last_error or 'the Deck did not answer'})"))
    if sender.rows.dropped:
        parts.append(f"{sender.rows.dropped} rows were dropped (the spool failed: "
                     f"{sender.rows.trouble}, and memory holds only so much)")
    if sender.rollouts_dropped:
        parts.append(f"{sender.rollouts_dropped} rollout steps were dropped at the spool's bound "
                     f"({(sender.rollouts.max_pending_bytes or 0) / 2**20:.0f} MB)")
    if state.rows_dropped or state.rollouts_refused:
        parts.append(f"the Deck refused {state.rows_dropped} rows and "
                     f"{state.rollouts_refused} rollout steps")
    if not parts:
        return None
    return "GRPO Deck: " + "; ".join(parts) + "; " + where_left(sender, spool, rows + steps)


def where_left(sender: Sender, spool: RunDir | None, waiting: int) -> str:
    """Where what was not delivered is: a folder to sync, or (the spool could not be
    written) memory, which the process takes with it."""
    lost = sender.rows.lost + sender.rollouts.lost
    if waiting and lost >= waiting:
        return (f"they were kept in memory only (the spool could not be written: "
                f"{sender.rows.trouble or sender.rollouts.trouble}), so they are lost")
    if waiting and spool is not None:
        where = f"they are in {spool.path}: run `{sync_command(spool)}` when the Deck answers"
    else:
        where = f"spool: {sender.kept_in}"
    if waiting and lost:
        return (f"{lost} of them were kept in memory only (the spool could not be written: "
                f"{sender.rows.trouble or sender.rollouts.trouble}) and are lost; the others: "
                + where)
    return where
