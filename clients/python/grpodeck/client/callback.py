"""``DeckCallback``: two lines make any TRL (or transformers ``Trainer``) script report to GRPO
Deck live: metrics, rollouts, stop requests and how the run ended.

On the training thread the callback only turns each ``on_log`` dict into rows and enqueues them
(see ``grpodeck.client.sender`` for why sending lives on its own thread with a disk spool), and
reads the stop flag the sender keeps. Registering the run (``POST /api/runs`` with
``source: external``) and the final report happen at train begin and end, where a short wait is
harmless. Reporting never breaks training: a failure is a warning, once.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import rollouts
from grpodeck.client.sender import Sender, Target
from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut

log = logging.getLogger("grpodeck.client")

URL_ENV, KEY_ENV = "GRPO_DECK_URL", "GRPODECK_API_KEY"


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


def rows_from_logs(step: int, logs: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``on_log`` dict as a train row and an eval row (each only if non-empty)."""
    train: dict[str, Any] = {}
    evals: dict[str, Any] = {}
    for name, raw in logs.items():
        value = encode_value(raw)
        if value is not None:
            (evals if name.startswith("eval_") else train)[name] = value
    return [{"step": step, "metrics": m} for m in (train, evals) if m]


def _spec_value(value: Any) -> Any:
    """A config value as the contract's flat JSON spec holds it (None: leave it out)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value if not isinstance(value, str) or len(value) <= 4_000 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str))
                                                 or v is None for v in value):
        return [v if not isinstance(v, str) else v[:1_000] for v in value][:1_000]
    return str(value)[:4_000] if isinstance(value, os.PathLike) else None


def spec_of(args: TrainingArguments, state: TrainerState, model: Any,
            extra: dict[str, Any]) -> dict[str, Any]:
    """The run's spec: the trainer's arguments (a GRPOConfig), its model name and step budget."""
    spec = {k: v for k, v in ((k, _spec_value(v)) for k, v in args.to_dict().items())
            if v is not None and "token" not in k}  # hub_token and friends stay on the node
    name = getattr(getattr(model, "config", None), "_name_or_path", None)
    if name:
        spec["model"] = str(name)[:4_000]
    if state.max_steps and state.max_steps > 0:
        spec["max_steps"] = int(state.max_steps)
    return {**spec, **extra}


class SenderCallback(TrainerCallback):
    """The training-thread half of reporting, shared by ``DeckCallback`` and the worker's
    ``MetricsReporter``: each ``on_log`` dict becomes rows in the ``Sender``'s queue, and the
    sender's stop (or "run over") becomes ``control.should_training_stop`` at the next
    ``on_log``/``on_step_end``. Nothing here waits on the network."""

    sender: Sender | None = None

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.sender is None or not logs or not state.is_world_process_zero:
            return
        self._before_rows(state, logs)
        self.sender.put_rows(rows_from_logs(state.global_step, logs))
        self._obey(control)

    def _before_rows(self, state: TrainerState, logs: dict[str, Any]) -> None:
        """A hook for what rides with a log's rows (DeckCallback's rollout capture)."""

    def _obey(self, control: TrainerControl) -> None:
        if self.sender is not None and self.sender.state.stop:
            control.should_training_stop = True

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self._obey(control)

    def _close_sender(self, deadline: float) -> Sender | None:
        """Deliver what is queued and spooled (waiting up to ``deadline`` s); the sender, now
        stopped, or None when there was none."""
        sender, self.sender = self.sender, None
        if sender is not None and not sender.close(deadline):
            log.warning("grpodeck: %d rows were not delivered; they are in %s", sender.pending(),
                        sender.spool_path)
        return sender


class DeckCallback(SenderCallback):
    """Report this run to GRPO Deck at ``url`` (or ``$GRPO_DECK_URL``) as ``name``.

    ``api_key`` (or ``$GRPODECK_API_KEY``): a key from the dashboard's account page; not needed
    when the Deck runs in development mode on this machine. ``attach(trainer)`` adds rollout
    capture on a stock ``trl.GRPOTrainer``. ``stop_on_critical`` lets the Deck's guard rail stop
    the run on a critical finding.
    """

    def __init__(self, url: str | None = None, name: str | None = None, api_key: str | None = None,
                 *, spool_dir: str | Path | None = None, flush_seconds: float = 2.0,
                 rollout_every: int = 1, rollout_groups: int = 4, stop_on_critical: bool = False,
                 finish_deadline: float = 120.0, timeout: float = 5.0) -> None:
        self.url = (url or os.environ.get(URL_ENV) or "").rstrip("/")
        self.name = name
        self.api_key = api_key or os.environ.get(KEY_ENV)
        self.spool_dir = Path(spool_dir) if spool_dir else None
        self.flush_seconds = flush_seconds
        self.rollout_every, self.rollout_groups = max(1, rollout_every), rollout_groups
        self.extra_spec: dict[str, Any] = {"stop_on_critical": stop_on_critical}
        self.finish_deadline = finish_deadline
        self.timeout = timeout
        self.run: ExternalRunOut | None = None
        self.sender: Sender | None = None
        self._trainer: Any = None
        self._train_logs = 0
        self._warned: set[str] = set()

    # -- setup -----------------------------------------------------------------------------
    def attach(self, trainer: Any) -> DeckCallback:
        """Capture rollouts from this trainer (and add the callback to it if it is not there)."""
        self._trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def register(self, spec: dict[str, Any]) -> ExternalRunOut:
        """``POST /api/runs`` (source external): the run id, its token and its page."""
        body = ExternalRunIn(source="external", name=self.name or "external run", spec=spec)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = httpx.post(f"{self.url}/api/runs", json=body.model_dump(mode="json"),
                              headers=headers, timeout=max(self.timeout, 10.0))
        if response.status_code != 201:
            raise RuntimeError(f"GRPO Deck refused the run ({response.status_code}): "
                               f"{response.text[:500]}")
        return ExternalRunOut.model_validate(response.json())

    # -- Trainer callbacks -----------------------------------------------------------------
    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.sender is not None:
            return
        if not self.url:
            self._warn_once("url", "grpodeck: no url (pass url= or set %s); not reporting", URL_ENV)
            return
        self.name = self.name or Path(args.output_dir or "run").name
        try:
            self.run = self.register(spec_of(args, state, model, self.extra_spec))
        except (httpx.HTTPError, RuntimeError, ValueError) as exc:
            self._warn_once("register", "grpodeck: could not register the run at %s (%s); "
                            "training goes on without reporting", self.url, exc)
            return
        spool_dir = self.spool_dir or Path(args.output_dir or ".") / "grpodeck-spool"
        spool_path = spool_dir / f"run-{self.run.id}-{uuid.uuid4().hex[:8]}.metrics.jsonl"
        self.sender = Sender(Target(self.url, self.run.id, self.run.token), spool_path,
                             flush_seconds=self.flush_seconds, timeout=self.timeout)
        self.sender.start()
        print(f"GRPO Deck: run {self.run.id} is live at {self.run.url}", file=sys.stderr,
              flush=True)
        if self._trainer is None and self.rollout_groups > 0:
            self._warn_once("rollouts", "grpodeck: metrics only; call DeckCallback.attach(trainer)"
                            " to also send rollouts")

    def _before_rows(self, state: TrainerState, logs: dict[str, Any]) -> None:
        if "loss" in logs and self._trainer is not None and self.rollout_groups > 0:
            self._capture(state.global_step)

    def _capture(self, step: int) -> None:
        self._train_logs += 1
        if self._train_logs % self.rollout_every or "rollouts" in self._warned:
            return
        try:
            groups = rollouts.from_trainer_logs(self._trainer, self.rollout_groups)
        except rollouts.CaptureUnavailable as exc:
            self._warn_once("rollouts", "grpodeck: cannot read rollouts from this TRL version "
                            "(%s); metrics only", exc)
            return
        if groups and self.sender is not None:
            self.sender.put_rollouts(step, groups)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        """Deliver what is spooled (waiting up to ``finish_deadline``), then end the run."""
        sender = self._close_sender(self.finish_deadline)
        if sender is None:
            return
        if not sender.state.run_over:
            status = sender.finish(0)
            print(f"GRPO Deck: run {sender.target.run_id} ended {status or 'unreported'}",
                  file=sys.stderr, flush=True)
        sender.shutdown()
