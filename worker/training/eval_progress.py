"""The evaluation as a stage: "evaluating 3/12" lines on the child's stdout while TRL evaluates.

Why: a long evaluation left the run page at "training" with the step and the ETA frozen, which
looks hung (issue 34). transformers calls ``on_prediction_step`` after each eval batch and
``on_evaluate`` when the evaluation is over; the supervisor ships the latest line as the run's
stage (``worker.log_shipper``, ``grpodeck.contract.wire.parse_stage_line``).
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback

from grpodeck.contract.wire import stage_line

PRINT_EVERY_S = 1.0  # a line per second at most: an eval of 10,000 batches is not 10,000 lines


class EvalProgress(TrainerCallback):  # type: ignore[misc]
    def __init__(self, say: Any = print, clock: Any = time.monotonic) -> None:
        self.say, self.clock = say, clock
        self.done = 0
        self.last_said = float("-inf")

    def _line(self, stage: str, progress: tuple[int, int] | None = None) -> None:
        self.say(stage_line(stage, progress), flush=True)
        self.last_said = self.clock()

    def on_prediction_step(self, args: Any, state: Any, control: Any,
                           eval_dataloader: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        try:
            total = len(eval_dataloader)
        except TypeError:  # no length (an iterable dataset): nothing to say n of
            return
        self.done += 1
        if self.done == 1 or self.done >= total or self.clock() - self.last_said >= PRINT_EVERY_S:
            self._line("evaluating", (min(self.done, total), max(total, 1)))

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The evaluation is over: back to training steps (or on to saving at the end)."""
        self.done = 0
        if state.is_world_process_zero:
            self._line("training")
