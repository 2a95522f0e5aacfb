"""Capture the groups GRPO actually scored, with the trainer's own numbers, for the dashboard.

Why a trainer subclass: rewards and advantages are only meaningful as the trainer computed them
(weights, ``scale_rewards``, unscorable rows), and TRL already records them in ``self._logs`` in
``_generate_and_score_completions`` (whether or not ``log_completions`` is on). Token lengths
and truncation are not in ``_logs``, so we read them from that method's output right after it
runs, when the tail of the ``_logs`` deques is exactly this generation batch, and keep a snapshot
of the latest *train* batch (eval generations also write to ``_logs``). At every
``rollout_every``-th training log we hand the first ``rollout_groups`` groups to a sink (the
``MetricsReporter``). Capture never breaks training: errors are logged and skipped.

Wire shape of one captured step (``grpodeck.contract.wire.RolloutStep``; also produced by
``app.importers.completions``)::

    {"step": int, "groups": [{"index": int, "prompt": str, "completions": [
        {"text": str, "rewards": {name: float|null}, "total": float|null,
         "advantage": float, "length": int, "truncated": bool,
         "reasons": {name: str}}]}]}     # reasons: only rewards that explained a low score

Reasons come from rewards that log them through TRL's ``log_extra`` (``worker.rewards.outcome``):
TRL keeps those columns in ``_logs["extra"]``, aligned with the batch like the rewards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from trl import GRPOTrainer

from grpodeck.client.rollouts import build_groups, weighted_total  # noqa: F401  (re-exported)
from worker.rewards.outcome import REASON_PREFIX

log = logging.getLogger(__name__)

RolloutSink = Callable[[int, list[dict[str, Any]]], None]


class CapturingGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that snapshots each train generation batch and reports sampled groups."""

    def __init__(self, *args: Any, rollout_every: int = 1, rollout_groups: int = 4,
                 rollout_sink: RolloutSink | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rollout_every = max(1, rollout_every)
        self.rollout_groups = rollout_groups
        self.rollout_sink = rollout_sink
        self._train_logs_seen = 0
        self._rollout_batch: dict[str, Any] | None = None

    @property
    def _capturing(self) -> bool:
        return self.rollout_sink is not None and self.rollout_groups > 0

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self._capturing and self.model.training:
            try:
                self._rollout_batch = self._snapshot(output)
            except Exception:  # capture must never stop training
                log.exception("could not capture rollouts; continuing without them")
                self._rollout_batch = None
        return output

    def _snapshot(self, output: dict[str, Any]) -> dict[str, Any] | None:
        """This batch's rows of ``_logs`` plus token lengths/truncation (TRL's definitions:
        length counts the EOS token; truncated = last token is neither EOS nor pad)."""
        ids, mask = output["completion_ids"], output["completion_mask"]
        lengths = mask.sum(dim=1)
        last = ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        stops = torch.tensor([*self.eos_token_ids, self._tokenizer.pad_token_id], device=ids.device)
        truncated = ~torch.isin(last, stops)
        # mask_truncated_completions zeroes truncated rows: they ran to the cap.
        cut = lengths == 0
        lengths = torch.where(cut, min(ids.size(1), self.args.max_completion_length), lengths)
        truncated = truncated | cut
        lengths = self.accelerator.gather(lengths).tolist()
        truncated = self.accelerator.gather(truncated).tolist()
        n = len(lengths)
        if len(self._logs["prompt"]) < n or len(self._logs["advantages"]) < n:
            log.warning("rollout capture: trainer logs are not aligned with the batch; skipped")
            return None

        def tail(d: Any) -> list[Any]:
            return list(d)[-n:]

        reasons = {column.removeprefix(REASON_PREFIX): tail(values)
                   for column, values in self._logs["extra"].items()
                   if column.startswith(REASON_PREFIX) and len(values) >= n}
        return {"prompts": tail(self._logs["prompt"]), "completions": tail(self._logs["completion"]),
                "rewards": {name: tail(self._logs["rewards"][name]) for name in self.reward_func_names},
                "advantages": tail(self._logs["advantages"]), "lengths": lengths, "truncated": truncated,
                "reasons": reasons}

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # Before super().log(): the reporter's on_log then flushes these with the step's rows.
        if self._capturing and self.model.training and "loss" in logs:
            self._train_logs_seen += 1
            if self._train_logs_seen % self.rollout_every == 0 and self._rollout_batch:
                try:
                    if self.accelerator.is_main_process:
                        groups = build_groups(self._rollout_batch, self.num_generations,
                                              self.rollout_groups, self.reward_weights.tolist())
                        self.rollout_sink(self.state.global_step, groups)  # type: ignore[misc]
                except Exception:
                    log.exception("could not report rollouts at step %d", self.state.global_step)
        super().log(logs, start_time)
