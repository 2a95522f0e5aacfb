"""Stream the trainer's logged metrics to the GRPO Deck server, and obey its stop requests.

The worker reports exactly as a user's own script does with ``DeckCallback``: through the
client's background ``Sender`` (``grpodeck.client.sender``), so nothing slow happens on the
training thread. ``on_log`` turns the log dict into rows (``rows_from_logs``) and enqueues them;
``on_log``/``on_step_end`` read the sender's flags. The sender thread spools every row to
``metrics.jsonl`` in the run's output dir before sending it, posts what the server has not
acknowledged in bounded batches (every ``flush_seconds``, or as soon as ``batch_rows`` rows
wait), heartbeats with an empty batch so a cancel reaches a run between logging steps, and
backs off while the server is away.

Rows are ``{"step": global_step, "metrics": {name: value}}``; eval logs (``eval_*`` keys) go in
their own row with the same step, and the end-of-training summary (``train_runtime``, ...) is a
row at the final step. Non-finite floats are sent as "nan"/"inf"/"-inf"; ``None`` and non-numbers
are dropped.

The server's answer carries ``stop`` (a user's cancel, a guard rail): training stops at the next
``on_log``/``on_step_end``. A 401/404/409 means the run is over on the server (ended, lost, token
revoked): training stops and nothing more is sent. A batch it refuses otherwise (422) is dropped
with a warning; later rows go on. Captured rollouts (``worker.training.rollouts``) ride in the
same batches, the latest few kept in memory only (samples, not the record).

``on_train_end`` delivers everything for up to ``report_deadline`` seconds; whatever is still
unacknowledged when the child exits stays in the spool, and the supervisor (``worker.tasks``)
replays it.

System metrics (CPU %, RSS, GPU memory and utilisation, tokens/s: ``system/*``) come from the
client's ``SystemSampler``, started with the sender on rank 0 and closed (a last sample) before
the final delivery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerControl, TrainerState, TrainingArguments

from grpodeck.client.callback import SenderCallback, encode_value, rows_from_logs  # noqa: F401
from grpodeck.client.sender import Sender, Target
from grpodeck.client.system import start_sampler


class MetricsReporter(SenderCallback):
    """Report to ``{report_url}/api/runs/{run_id}/metrics`` through a ``Sender`` spooling to
    ``spool_path`` (the supervisor replays that file)."""

    def __init__(self, report_url: str, run_id: int | str, token: str, *,
                 spool_path: str | Path, batch_rows: int = 20, flush_seconds: float = 5.0,
                 timeout: float = 10.0, report_deadline: float = 300.0,
                 system_seconds: float | None = None) -> None:
        self.report_deadline = report_deadline
        self.system_seconds = system_seconds  # None: $GRPODECK_SYSTEM_SECONDS or 10 s
        self._sender = Sender(Target(report_url, run_id, token), Path(spool_path),
                              flush_seconds=flush_seconds, batch_rows=batch_rows, timeout=timeout)

    @property
    def stop_requested(self) -> bool:
        return self._sender.state.stop

    @property
    def run_over(self) -> bool:
        return self._sender.state.run_over

    def add_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        """The rollout sink (``CapturingGRPOTrainer``): one captured step's groups."""
        self._sender.put_rollouts(step, groups)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero and self._sender.ident is None:
            self.sender = self._sender
            self._sender.start()
            # system/* metrics, on the process that reports (rank 0): grpodeck.client.system
            self.sampler = start_sampler(self._sender.put_rows, seconds=self.system_seconds)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        self._close_sender(self.report_deadline)  # what is left stays in the spool: replayed

    def close(self) -> None:
        """After training (or its failure): stop sending at once; the spool keeps the rest."""
        self._close_sender(0)
        self._sender.shutdown()
