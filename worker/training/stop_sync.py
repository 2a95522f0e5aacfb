"""Every rank stops at the same step, when any of them must (a cancel, a guard rail).

Only rank 0 talks to the server, so only its reporter learns of a stop. A rank that left the
training loop alone would leave the others waiting forever in their next collective (DDP's
gradient all-reduce), so at each step's end the ranks agree: the stop flag is all-reduced (max)
and the agreed value is the only one that counts until the next step's end; a flag a callback
sets in between (the reporter's ``on_log``) waits for that agreement instead of stopping one rank
early. A single process has nothing to agree with and is left alone.

Each rank also says at each logging step that it got there (the run's log stream shows every
rank's progress while the run is live; only rank 0 reports metrics).
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from grpodeck.contract.log_markers import rank_line
from worker.training.markers import emit


class StopTogether(TrainerCallback):
    """Put after the callbacks that may set ``control.should_training_stop``."""

    def __init__(self) -> None:
        self.agreed = False

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        from accelerate import PartialState

        flag = torch.tensor([int(bool(control.should_training_stop))],
                            device=PartialState().device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        self.agreed = bool(flag.item())
        control.should_training_stop = self.agreed
        if state.global_step % max(1, int(args.logging_steps)) == 0 or self.agreed:
            # one whole line, one write: the run page's Devices panel reads it (log_markers)
            emit(rank_line(dist.get_rank(), dist.get_world_size(), state.global_step,
                           self.agreed))

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               **kwargs: Any) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            control.should_training_stop = self.agreed
