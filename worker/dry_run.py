"""Dry runs on the worker: sample ``num_generations`` completions for a few prompts with the
spec's model, score them with every reward, train nothing, and post the scores back.

The Celery task (``grpodeck.dry_run``, sent by name from the web app) runs the sampling in a
child process that dies with the worker (``lifeline``): a model that exhausts memory or a reward
that crashes the interpreter takes the child down, not the worker. The child is forked warm from
the pool process once that has the training stack imported (``worker.training.warm``, as a
training run's child is): a person waiting on the form gets a dry run in ~1 s instead of ~7 s,
most of which was importing torch, transformers and TRL again (launch to answer through a real
stack, tiny model, 2 CPUs: bench/dry_run_time.py). The pool process's first dry run or run imports
the stack, pinging meanwhile; a worker that cannot or may not fork starts ``python -m
worker.dry_run``, a fresh interpreter. Either way the built-ins' offline switches apply
(``_offline_if_builtin``). A reward that raises is not a failure of the dry run: its traceback
is the answer, with whatever was scored before.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx

from grpodeck.client.retry import RETRY_STATUSES, retry_after
from worker.celery_app import celery_app
from worker.identity import worker_name
from worker.settings import get_settings
from worker.supervise import Child, redact_paths, tail
from worker.training import warm
from worker.training.child import SUPERVISOR_ENV

log = logging.getLogger(__name__)

CHILD_TIMEOUT_S = 900  # model download + sampling; a hub model on CPU can take minutes
POST_ATTEMPTS = 10  # a database locked for a while answers 503 + Retry-After several times
TEXT_CHARS = 4_000


def reward_keys(names: list[str]) -> list[str]:
    """One key per reward; a reward used twice (two targets) gets ``name#2``."""
    keys: list[str] = []
    for name in names:
        key, n = name, 1
        while key in keys:
            n += 1
            key = f"{name}#{n}"
        keys.append(key)
    return keys


def _render(tokenizer: Any, prompt: Any) -> str:
    if isinstance(prompt, list):  # conversational: what TRL feeds the model
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return str(prompt)


def _sample(model: Any, tokenizer: Any, prompt: Any, spec: Any) -> list[list[int]]:
    """A group of completions' token ids, as TRL's ``completion_ids``: up to and including the
    first end-of-sequence token, no padding."""
    import torch

    inputs = tokenizer(_render(tokenizer, prompt), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=True, temperature=spec.temperature,
                             max_new_tokens=spec.max_completion_length,
                             num_return_sequences=spec.num_generations,
                             pad_token_id=tokenizer.pad_token_id)
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
    groups = []
    for row in out[:, inputs["input_ids"].shape[1]:].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
        groups.append(row[:end])
    return groups


def _score(spec: Any, rows: list[dict[str, Any]], texts: list[list[str]],
           ids: list[list[list[int]]]) -> tuple[list[dict[str, Any]], str | None]:
    """Call every reward the way TRL does (prompts, completions and the dataset's other columns,
    one entry per completion); stop at the first that raises and return its traceback."""
    from worker.rewards.registry import build

    keys = reward_keys([r.name for r in spec.rewards])
    groups: list[dict[str, Any]] = []
    for row, completions, completion_ids in zip(rows, texts, ids, strict=True):
        chat = isinstance(row["prompt"], list)
        given = [[{"role": "assistant", "content": t}] if chat else t for t in completions]
        columns = {k: [v] * len(completions) for k, v in row.items() if k != "prompt"}
        scores: dict[str, list[float | None]] = {}
        for key, reward in zip(keys, spec.rewards, strict=True):
            fn = build(reward.name, reward.params, spec.max_completion_length)
            try:
                scores[key] = [_number(v) for v in
                               fn(prompts=[row["prompt"]] * len(completions), completions=given,
                                  completion_ids=completion_ids, **columns)]
            except Exception:  # noqa: BLE001 - the traceback is the answer a person needs
                return groups, (f"reward {key!r} raised on prompt {len(groups) + 1}:\n"
                                + traceback.format_exc())
        groups.append({"prompt": _render_prompt(row["prompt"]),
                       "completions": [{"text": t[:TEXT_CHARS],
                                        "rewards": {k: scores[k][i] for k in keys}}
                                       for i, t in enumerate(completions)]})
    return groups, None


REFERENCE_COLUMNS = ("answer", "solution", "reference")


def score_references(spec: Any, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """When the dataset has reference answers, score them as if the model had written them:
    a reward that does not give a correct answer its top score is broken before any sampling
    can tell. None when there is no reference column; a reward that raises is left out (the
    sampled scoring reports its traceback)."""
    from worker.rewards.registry import build

    column = next((c for c in REFERENCE_COLUMNS if rows and c in rows[0]), None)
    if column is None:
        return None
    chat = isinstance(rows[0]["prompt"], list)
    given = [[{"role": "assistant", "content": str(r[column])}] if chat else str(r[column])
             for r in rows]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    scores: dict[str, list[float | None]] = {}
    for key, reward in zip(reward_keys([r.name for r in spec.rewards]), spec.rewards,
                           strict=True):
        try:
            values = build(reward.name, reward.params, spec.max_completion_length)(
                prompts=[r["prompt"] for r in rows], completions=given, **columns)
        except Exception:  # the sampled scoring reports it, with its traceback
            log.info("dry run: reward %s raised on the reference answers", key, exc_info=True)
        else:
            scores[key] = [_number(v) for v in values]
    return {"column": column, "count": len(rows), "rewards": scores}


def _number(value: Any) -> float | None:
    """A reward's score as JSON can carry it: None (abstained) for None and NaN/inf."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _render_prompt(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role')}: {m.get('content')}" for m in prompt)[:TEXT_CHARS]
    return str(prompt)[:TEXT_CHARS]


def dry_run(spec_data: dict[str, Any], prompts: int) -> dict[str, Any]:
    """The raw result the web app analyses: weights, scored groups, error, timings."""
    from grpodeck.contract.spec import RunSpec
    from worker.training.child import _offline_if_builtin

    spec = RunSpec.model_validate(spec_data)
    weights = dict(zip(reward_keys([r.name for r in spec.rewards]),
                       [r.weight for r in spec.rewards], strict=True))
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with _offline_if_builtin(spec):
        import torch
        from transformers import set_seed

        from worker.training.datasets import load_prompts
        from worker.training.models import load_model_and_tokenizer

        set_seed(spec.seed)
        torch.set_num_threads(max(1, torch.get_num_threads()))
        model, tokenizer = load_model_and_tokenizer(spec.model)
        model.eval()
        train, _ = load_prompts(spec)
        rows = [train[i] for i in range(min(prompts, len(train)))]
        timings["load"] = time.perf_counter() - started
        mark = time.perf_counter()
        ids = [_sample(model, tokenizer, row["prompt"], spec) for row in rows]
        texts = [tokenizer.batch_decode(group, skip_special_tokens=True) for group in ids]
        timings["sample"] = time.perf_counter() - mark
    mark = time.perf_counter()
    groups, error = _score(spec, rows, texts, ids)
    reference = score_references(spec, rows)
    timings["score"] = time.perf_counter() - mark
    timings["total"] = time.perf_counter() - started
    return {"weights": weights, "groups": groups, "error": error, "timings": timings,
            "reference": reference}


def _post(report_url: str, dry_run_id: int, ticket: str, body: dict[str, Any]) -> None:
    url = f"{report_url.rstrip('/')}/api/dry-runs/{dry_run_id}/result"
    for attempt in range(POST_ATTEMPTS):
        try:
            reply = httpx.post(url, json=body, headers={"Authorization": f"Bearer {ticket}"},
                               timeout=30)
        except httpx.TransportError:
            time.sleep(min(30, 2 ** attempt))
            continue
        if reply.status_code in RETRY_STATUSES or reply.status_code >= 500:
            # 503 while the database is locked: the same result again, when the server says
            time.sleep(retry_after(reply) or min(30, 2 ** attempt))
            continue
        if reply.status_code == 401:  # already answered (a redelivered task): nothing to do
            log.info("dry run %s: result refused: %s", dry_run_id, reply.text)
        elif reply.status_code >= 400:
            log.error("dry run %s: result refused: %s %s", dry_run_id, reply.status_code,
                      reply.text[:500])
        return
    log.error("dry run %s: the web app did not answer; result lost", dry_run_id)


def _alive(report_url: str, dry_run_id: int, ticket: str) -> bool | None:
    """Tell the web app this worker samples the dry run (``app.dryruns.lost``). True: go on;
    False: the dry run is over (answered, or failed as lost: a redelivered message), so do not
    sample; None: no answer (the web app is down), go on: the result post retries."""
    url = f"{report_url.rstrip('/')}/api/dry-runs/{dry_run_id}/alive"
    try:
        reply = httpx.post(url, json={"worker": worker_name()}, timeout=10,
                           headers={"Authorization": f"Bearer {ticket}"})
    except httpx.TransportError as exc:
        log.warning("dry run %s: alive not delivered: %s", dry_run_id, exc)
        return None
    if reply.status_code == 401:
        return False
    return True if reply.status_code < 400 else None


def _start_child(args: list[str], stdout: IO[bytes], stderr: IO[bytes],
                 ping: Callable[[], object], every: float) -> Child:
    """The sampling child: forked from this pool process with the training stack imported (its
    first dry run or run imports it here, calling ``ping`` every ``every`` seconds), or, where
    forking is unavailable or switched off (``GRPODECK_WARM_START=false``), a fresh
    interpreter. It dies with this process either way (``main`` ties it)."""
    command = [sys.executable, "-m", "worker.dry_run", *args]
    env = {**os.environ, SUPERVISOR_ENV: str(os.getpid())}
    if warm.ready(ping, every):
        return warm.fork_child(main, args, env, stdout, stderr, program=__file__, title=command)
    return subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)


def _finish(proc: Child, ping: Callable[[], object], every: float) -> int | None:
    """The child's exit code, calling ``ping`` every ``every`` seconds while it runs; None when
    it overran ``CHILD_TIMEOUT_S`` and was killed."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while True:
        try:
            return proc.wait(timeout=max(0.1, min(every, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                return None
            ping()


def _run_child(args: list[str], folder: Path, ping: Callable[[], object], every: float
               ) -> dict[str, Any] | None:
    """Run the sampling child with ``args``, its output in ``folder``; the error body when it
    failed or overran, None when it succeeded."""
    with (folder / "stdout.log").open("wb") as stdout, \
            (folder / "stderr.log").open("wb") as stderr:
        code = _finish(_start_child(args, stdout, stderr, ping, every), ping, every)
    if code is None:
        return {"error": f"the dry run took longer than {CHILD_TIMEOUT_S} s and was stopped"}
    if code != 0:
        return {"error": f"the dry run failed (exit {code}):\n"
                         + tail(folder / "stderr.log", 8000)}
    return None


@celery_app.task(name="grpodeck.dry_run")
def dry_run_task(dry_run_id: int, spec: dict[str, Any], prompts: int, report_url: str,
                 ticket: str) -> None:
    if _alive(report_url, dry_run_id, ticket) is False:
        log.info("dry run %s is over (answered or lost): not sampled again", dry_run_id)
        return
    with tempfile.TemporaryDirectory(prefix="grpodeck-dry-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps(spec))
        body = _run_child(
            ["--spec", str(spec_path), "--prompts", str(prompts), "--out", str(out_path)],
            Path(tmp), lambda: _alive(report_url, dry_run_id, ticket),
            get_settings().heartbeat_seconds)
        if body is None:
            body = (json.loads(out_path.read_text()) if out_path.exists()
                    else {"error": "the dry run wrote no result"})
    if isinstance(body.get("error"), str):
        body["error"] = redact_paths(body["error"])
    _post(report_url, dry_run_id, ticket, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sample and score one dry run")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if os.environ.get(SUPERVISOR_ENV):  # die with the worker that waits for us (even kill -9)
        from worker.training.lifeline import tie_to_parent

        tie_to_parent(int(os.environ[SUPERVISOR_ENV]))
    try:
        result = dry_run(json.loads(Path(args.spec).read_text()), args.prompts)
    except Exception:  # noqa: BLE001 - the model or dataset did not load: that is the answer
        result = {"error": traceback.format_exc()}
    Path(args.out).write_text(json.dumps(result, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
