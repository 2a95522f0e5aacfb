"""The training process a Celery task launches for one run.

Run as ``GRPODECK_RUN_TOKEN=... python -m worker.training.child --spec SPEC.json --run-id ID
--report-url URL --output-dir DIR``. The token comes from the environment, never the command
line (which every user of the machine can read in ``ps``). With ``GRPODECK_SUPERVISOR_PID`` set
(the worker sets it) the child dies with that process (``lifeline``). It lives in its own
process so a crash, an OOM or a cancel can never take the Celery worker down, and so the task
can capture its stderr. Exit code 0 means the
run finished (including a graceful stop requested by the server); anything else is a failure
whose traceback is the tail of stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpodeck.contract.catalog import is_local_dataset
from grpodeck.contract.log_markers import rank_failed_line
from grpodeck.contract.wire import STAGE_PREFIX
from worker.training.environment import environment
from worker.training.markers import emit

if TYPE_CHECKING:
    from trl import GRPOTrainer

    from grpodeck.contract.spec import RunSpec

log = logging.getLogger("worker.training")


OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
# The same switches as the libraries hold them once imported (they read the variables at import):
# module, attribute. A child forked warm (``worker.training.warm``) has them imported already.
OFFLINE_CONSTANTS = (("huggingface_hub.constants", "HF_HUB_OFFLINE"),
                     ("datasets.config", "HF_HUB_OFFLINE"),
                     ("datasets.config", "HF_DATASETS_OFFLINE"))


@contextmanager
def _offline_if_builtin(spec: RunSpec) -> Iterator[None]:
    """Built-ins never need the network: fail fast instead of waiting on hub timeouts.
    Hub ids keep the default (online) so a user's worker can download them. The variables are
    set for libraries not imported yet, and the libraries' own switches for those already
    imported (a warm child, an in-process caller); both are restored afterwards so the caller's
    process is left as it was."""
    local_data = spec.dataset.startswith("builtin:") or is_local_dataset(spec.dataset)
    if not (spec.model.startswith("builtin:") and local_data):
        yield
        return
    loaded = [(sys.modules[name], attr) for name, attr in OFFLINE_CONSTANTS if name in sys.modules]
    saved_constants = [getattr(module, attr) for module, attr in loaded]
    for module, attr in loaded:
        setattr(module, attr, True)
    try:
        with environment(dict.fromkeys(OFFLINE_VARS, "1")):
            yield
    finally:
        for (module, attr), value in zip(loaded, saved_constants, strict=True):
            setattr(module, attr, value)


TOKEN_ENV = "GRPODECK_RUN_TOKEN"
FINAL_MODEL_DIR = "final-model"  # under the output dir; the worker uploads it (worker.artifacts)
SUPERVISOR_ENV = "GRPODECK_SUPERVISOR_PID"


def train(spec: RunSpec | dict[str, Any], run_id: int | str, report_url: str, token: str,
          output_dir: str, *, batch_rows: int = 20, flush_seconds: float = 5.0,
          report_deadline: float = 300.0) -> GRPOTrainer:
    """Train one run to completion (or until the server says stop); returns the trainer (its
    ``model`` is what was trained). Raises on any error.

    ``batch_rows``/``flush_seconds`` tune metric reporting; ``report_deadline`` bounds how long
    the end of the run waits for an unreachable server (see ``MetricsReporter``)."""
    from grpodeck.contract.spec import RunSpec

    if not isinstance(spec, RunSpec):
        spec = RunSpec.model_validate(spec)
    with _offline_if_builtin(spec):
        return _train(spec, run_id, report_url, token, output_dir, batch_rows, flush_seconds,
                      report_deadline)


def stage(name: str) -> None:
    """Tell the supervisor (it reads this stdout) what the run is doing now; rank 0 speaks for
    a run on many devices."""
    from worker.training.ranks import is_main

    if is_main():
        print(f"{STAGE_PREFIX}{name}", flush=True)


def _train(spec: RunSpec, run_id: int | str, report_url: str, token: str, output_dir: str,
           batch_rows: int, flush_seconds: float, report_deadline: float) -> GRPOTrainer:
    from worker.rewards.registry import build_rewards
    from worker.training.config import (
        build_grpo_config,
        build_peft_config,
        check_target_modules,
    )
    from worker.training.datasets import drop_long_prompts, load_prompts
    from worker.training.hardware import describe
    from worker.training.models import load_model_and_tokenizer
    from worker.training.ranks import is_main, world_size
    from worker.training.reporting import MetricsReporter
    from worker.training.rollouts import CapturingGRPOTrainer
    from worker.training.stop_sync import StopTogether

    Path(output_dir).mkdir(parents=True, exist_ok=True)
    log.info("run %s: %s on %s with %s (%s)", run_id, spec.name, spec.model, spec.dataset, describe())
    config = build_grpo_config(spec, output_dir)  # validate before the slow loads
    peft_config = build_peft_config(spec)
    stage("loading_model")
    model, tokenizer = load_model_and_tokenizer(spec.model)
    check_target_modules(model, spec)
    train_ds, eval_ds = load_prompts(spec)
    train_ds = drop_long_prompts(train_ds, tokenizer, spec.max_prompt_length)
    if eval_ds is not None:
        eval_ds = drop_long_prompts(eval_ds, tokenizer, spec.max_prompt_length)
    reward_funcs = build_rewards(spec)
    # Rank 0 reports; the other ranks of a run on many devices stay silent (no sender, no
    # spool), but capture rollouts like it (the capture gathers across ranks) and drop them.
    reporter = MetricsReporter(report_url, run_id, token, batch_rows=batch_rows,
                               flush_seconds=flush_seconds, report_deadline=report_deadline,
                               spool_path=Path(output_dir) / "metrics.jsonl") if is_main() else None
    callbacks: list[Any] = [reporter] if reporter is not None else []
    if eval_ds is not None:
        from worker.training.eval_progress import EvalProgress

        callbacks.append(EvalProgress())  # "evaluating 3/12" as the run's stage
    if world_size() > 1:
        callbacks.append(StopTogether())  # after the reporter, whose stop it shares
    try:
        trainer = CapturingGRPOTrainer(
            model=model, processing_class=tokenizer, reward_funcs=reward_funcs, args=config,
            train_dataset=train_ds, eval_dataset=eval_ds, callbacks=callbacks,
            peft_config=peft_config, rollout_every=spec.rollout_every,
            rollout_groups=spec.rollout_groups,
            rollout_sink=reporter.add_rollouts if reporter is not None else _drop_rollouts)
        stage("first_step")
        trainer.train()
        stage("saving")
        if spec.save_steps is not None:  # files were asked for: the final model and state too
            trainer.save_model(str(Path(output_dir) / FINAL_MODEL_DIR))
            trainer.save_state()
    finally:
        if reporter is not None:
            reporter.close()
    if reporter is not None and reporter.stop_requested:
        log.info("run %s stopped at step %d on the server's request", run_id, trainer.state.global_step)
    return trainer


def _drop_rollouts(step: int, groups: list[dict[str, Any]]) -> None:
    """The rollout sink of a rank other than 0: rank 0 reports the run's rollouts."""


@contextmanager
def _empty_working_dir() -> Iterator[None]:
    """Hub ids look like relative paths (``org/name``) and both ``from_pretrained`` and
    ``load_dataset`` try a local path first: from an empty working directory a hub id can only
    mean the hub, never a file next to the worker (bug 4)."""
    previous = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="grpodeck-cwd-") as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.training.child", description=__doc__)
    parser.add_argument("--spec", required=True, help="path to the run spec JSON")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--report-url", required=True, help="base URL of the GRPO Deck server")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--report-deadline", type=float, default=300.0,
                        help="seconds the end of the run waits for an unreachable server")
    args = parser.parse_args(argv)
    from worker.training.ranks import is_main, rank, record_failure, world_size

    who = f" rank{rank()}" if world_size() > 1 else ""
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s{who} %(levelname)s %(name)s: %(message)s")
    log.info("devices: CUDA_VISIBLE_DEVICES=%s",  # what this child was given (worker.slots)
             os.environ.get("CUDA_VISIBLE_DEVICES", "unset (every device)"))
    token = os.environ.get(TOKEN_ENV)
    if not token:
        parser.error(f"the run token must be in ${TOKEN_ENV}")
    output_dir = str(Path(args.output_dir).resolve())  # before training moves to an empty cwd
    if os.environ.get(SUPERVISOR_ENV):
        from functools import partial

        from grpodeck.client.spool import send_unacked
        from worker.training.lifeline import tie_to_parent

        url = f"{args.report_url.rstrip('/')}/api/runs/{args.run_id}/metrics"
        # Under a launcher the parent is the launcher (``worker.training.launch``); only rank 0
        # holds a spool to send.
        tie_to_parent(int(os.environ[SUPERVISOR_ENV]), last_words=partial(
            send_unacked, Path(output_dir) / "metrics.jsonl", url, token) if is_main() else None)
    try:
        from grpodeck.contract.spec import RunSpec

        spec = RunSpec.model_validate_json(Path(args.spec).read_text())
        with _empty_working_dir():
            train(spec, args.run_id, args.report_url, token, output_dir,
                  report_deadline=args.report_deadline)
    except Exception:  # noqa: BLE001 - the parent shows this traceback to the user
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        record_failure(output_dir, traceback.format_exc())
        if world_size() > 1:  # after the traceback: the Devices panel marks this rank failed
            emit(rank_failed_line(rank(), world_size()))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
