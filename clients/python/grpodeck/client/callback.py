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
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import rollouts
from grpodeck.client.artifacts import ArtifactError
from grpodeck.client.run import (  # noqa: F401  (encode_value, rows_from_logs: re-exported)
    URL_ENVS,
    DeckUnavailable,
    Run,
    config_value,
    encode_value,
    init,
    rows_from_logs,
    stamped,
)
from grpodeck.client.sender import Sender
from grpodeck.client.system import SystemSampler
from grpodeck.contract.alerts import AlertRules

log = logging.getLogger("grpodeck.client")


def spec_of(args: TrainingArguments, state: TrainerState, model: Any,
            extra: dict[str, Any]) -> dict[str, Any]:
    """The run's spec: the trainer's arguments (a GRPOConfig), its model name and step budget."""
    spec = {k: v for k, v in ((k, config_value(v)) for k, v in args.to_dict().items())
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
    sampler: SystemSampler | None = None  # system metrics (grpodeck.client.system)
    # Rows carry the client's time (``run.stamped``) where a run may be delivered long after it
    # was logged (``init``'s spool folder); the worker's runs are registered before they start.
    stamp_rows = False

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.sender is None or not logs or not state.is_world_process_zero:
            return
        if self.sampler is not None:  # the step its samples carry; tokens/s for this row
            logs = {**logs, **self.sampler.note(state.global_step, logs)}
        self._before_rows(state, logs)
        rows = rows_from_logs(state.global_step, logs)
        self.sender.put_rows(stamped(rows) if self.stamp_rows else rows)
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
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.close()  # its last sample goes out with the rest
        sender, self.sender = self.sender, None
        if sender is not None and not sender.close(deadline):
            log.warning("grpodeck: %d rows were not delivered; they are in %s", sender.pending(),
                        sender.kept_in)
        return sender


class DeckCallback(SenderCallback):
    """Report this run to GRPO Deck at ``url`` (or ``$GRPODECK_URL``) as ``name``: a
    ``grpodeck.client.Run`` opened at train begin and finished at train end.

    ``api_key`` (or ``$GRPODECK_API_KEY``): a key from the dashboard's account page; not needed
    when the Deck runs in development mode on this machine. ``attach(trainer)`` adds rollout
    capture on a stock ``trl.GRPOTrainer``. ``stop_on_critical`` lets the Deck's guard rail stop
    the run on a critical finding. ``tags``, ``group`` and ``alerts`` are the launch form's
    (checked by the server: a refusal raises ``DeckRefused`` at train begin). ``strict``: raise
    ``DeckUnavailable`` at train begin when the Deck cannot be reached or refuses the key,
    instead of training unreported. After ``train()``, ``stopped_reason`` says whether the Deck
    stopped the run ("cancelled", "guard_rail: ...") or None. ``artifacts``: upload each
    checkpoint folder the trainer saves (``save_steps``) to the run's Artifacts tab, waiting for
    the upload at each save (a failed upload is a warning). ``system_metrics``: sample CPU,
    memory, GPU and tokens/s every ``system_seconds`` (``grpodeck.client.system``).
    ``metric_map``: keys your own logging adds -> the Deck's names (``{"acc": "reward"}``).
    """

    stamp_rows = True

    def __init__(self, url: str | None = None, name: str | None = None, api_key: str | None = None,
                 *, spool_dir: str | Path | None = None, flush_seconds: float = 2.0,
                 rollout_every: int = 1, rollout_groups: int = 4, stop_on_critical: bool = False,
                 finish_deadline: float = 120.0, timeout: float = 5.0,
                 tags: list[str] | None = None, group: str | None = None,
                 alerts: AlertRules | dict[str, Any] | None = None,
                 strict: bool = False, artifacts: bool = False, system_metrics: bool = True,
                 system_seconds: float | None = None,
                 metric_map: dict[str, str] | None = None) -> None:
        self.url, self.name, self.api_key = url, name, api_key
        self.artifacts = artifacts
        self.system_metrics, self.system_seconds = system_metrics, system_seconds
        self.metric_map = metric_map
        self.spool_dir = Path(spool_dir) if spool_dir else None
        self.flush_seconds = flush_seconds
        self.rollout_every, self.rollout_groups = max(1, rollout_every), rollout_groups
        self.stop_on_critical = stop_on_critical
        self.tags, self.group, self.alerts, self.strict = tags, group, alerts, strict
        self.finish_deadline = finish_deadline
        self.timeout = timeout
        self.run: Run | None = None
        self.sender: Sender | None = None
        self._trainer: Any = None
        self._train_logs = 0
        self._warned: set[str] = set()

    @property
    def stopped_reason(self) -> str | None:
        """"cancelled", "guard_rail: <finding>", or None (not stopped by the Deck)."""
        return self.run.stopped_reason if self.run is not None else None

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

    # -- Trainer callbacks -----------------------------------------------------------------
    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.sender is not None:
            return
        spec = spec_of(args, state, model, {})
        if not self.url and not any(os.environ.get(k) for k in URL_ENVS):
            if self.strict:
                raise DeckUnavailable(f"no GRPO Deck url: pass url= or set {URL_ENVS[0]}")
            self._warn_once("url", "grpodeck: no url (pass url= or set %s); not reporting",
                            URL_ENVS[0])
            return
        self.run = init(self.url, self.name or Path(args.output_dir or "run").name,
                        config=spec, tags=self.tags, group=self.group, alerts=self.alerts,
                        api_key=self.api_key, strict=self.strict,
                        stop_on_critical=self.stop_on_critical,
                        spool_dir=self.spool_dir or Path(args.output_dir or ".") /
                        "grpodeck-spool", flush_seconds=self.flush_seconds,
                        timeout=self.timeout, finish_deadline=self.finish_deadline,
                        system_metrics=self.system_metrics, system_seconds=self.system_seconds,
                        metric_map=self.metric_map)
        self.sender, self.sampler = self.run.sender, self.run.sampler
        if self.sender is not None and self._trainer is None and self.rollout_groups > 0:
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
        if groups and self.run is not None:
            self.run.log_rollouts(step, groups)

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        """With ``artifacts=True``: upload the checkpoint folder just saved (transformers names
        it ``checkpoint-<global step>`` under ``output_dir``)."""
        if not self.artifacts or self.run is None or not state.is_world_process_zero:
            return
        folder = Path(args.output_dir or ".") / f"checkpoint-{state.global_step}"
        if not folder.is_dir():
            self._warn_once("checkpoint", "grpodeck: no %s to upload", folder)
            return
        try:
            self.run.log_artifact(folder, kind="checkpoint", step=state.global_step)
        except ArtifactError as exc:
            log.warning("grpodeck: checkpoint %s not uploaded: %s", folder.name, exc)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        """Deliver what is spooled (waiting up to ``finish_deadline``), then end the run."""
        self.sender = self.sampler = None  # Run.finish closes both
        if self.run is not None:
            self.run.finish()
