"""Code rewards: run a completion's Python against the row's tests in the sandbox.

``unit_tests`` is the true objective of the coding experiments; ``code_block_count`` is the
deliberately hackable proxy (it counts fences and never runs anything).

The dataset row gives ``tests``: one string (the whole test script: pass or fail as one) or a
list of strings (each test on its own, so a share can be scored), plus an optional ``setup``
string run before the completion (HumanEval's ``from typing import List``). The score comes from
outside the completion's interpreter: the tests run in a judge process and call the completion's
functions in a separate child over pipes, getting plain data back (``worker.rewards.harness``).
The judge reports through lines tagged with a random nonce only it knows (read from its stdin),
so nothing the completion prints, patches or exits with can forge a pass: it can only answer.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

from grpodeck.contract.text import completion_text
from worker import sandbox
from worker.rewards import harness
from worker.rewards.outcome import Outcome, report, short

FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
OPEN_FENCE = re.compile(r"```[^\n`]*\n(.*)\Z", re.DOTALL)
COST_METRIC = "sandbox/seconds_per_completion"
BATCH_METRIC = "sandbox/batch_seconds"
ISOLATION_METRIC = "sandbox/network_isolated"  # 1: own network namespace; 0: NOT isolated



def code_blocks(text: str) -> list[str]:
    """Closed fenced blocks, in order (```python ... ``` or bare ``` ... ```)."""
    return FENCE.findall(text)


def extract_code(text: str) -> str:
    """The last fenced block; else an unclosed final block (a truncated completion); else all."""
    blocks = code_blocks(text)
    if blocks:
        return blocks[-1].strip("\n")
    tail = OPEN_FENCE.search(text)
    return (tail.group(1) if tail else text).strip("\n")


def test_list(tests: Any) -> list[str]:
    """A row's tests as separate snippets; a single string is one test."""
    if tests is None:
        return []
    if isinstance(tests, str):
        return [tests] if tests.strip() else []
    return [str(t) for t in tests if str(t).strip()]


def build_job(code: str, tests: Sequence[str], setup: str, nonce: str) -> tuple[str, str]:
    """The sandbox's (source, stdin): the judge program, and this row's job on its stdin."""
    return harness.JUDGE, harness.job(code, list(tests), setup, nonce)


def _events(stdout: str, nonce: str) -> list[dict[str, Any]]:
    tag = nonce + " "
    events = []
    for line in stdout.splitlines():
        if line.startswith(tag):
            try:
                events.append(json.loads(line[len(tag):]))
            except ValueError:
                continue
    return events


def _crash_reason(result: sandbox.Result) -> str:
    if result.status == "timeout":
        return "timeout"
    if result.status == "output_limit":
        return "output limit"
    if result.status == "refused":
        return short(result.stderr)
    if result.signal is not None:
        return f"exited before the tests finished (killed by signal {result.signal})"
    return f"exited before the tests finished (exit code {result.returncode})"


def judge(result: sandbox.Result, nonce: str, n_tests: int, partial: bool) -> Outcome:
    """Turn one sandbox run into a score and, below 1, the reason."""
    events = _events(result.stdout, nonce)
    for kind, label in (("setup_error", "test setup failed"), ("syntax_error", "syntax error"),
                        ("code_error", "crashed")):
        failed = next((e for e in events if e.get("kind") == kind), None)
        if failed:
            error = str(failed.get("error", ""))
            reason = "memory limit" if error.startswith("MemoryError") else f"{label}: {error}"
            return Outcome(0.0, short(reason))
    tests = [e for e in events if e.get("kind") == "test"]
    if not any(e.get("kind") == "done" for e in events) or len(tests) != n_tests:
        return Outcome(0.0, _crash_reason(result))
    passed = sum(bool(e.get("passed")) for e in tests)
    if passed == n_tests:
        return Outcome(1.0)
    first = next(e for e in tests if not e.get("passed"))
    error = str(first.get("error") or "")
    what = "assert failed" if error == "AssertionError" else error
    score = passed / n_tests if partial else 0.0
    return Outcome(score, short(f"failed test {first.get('index', 0) + 1}/{n_tests}: {what}"))


def run_unit_tests(completions: Sequence[str], tests: Sequence[Any],
                   setups: Sequence[Any] | None = None, *, partial: bool = False,
                   limits: sandbox.Limits | None = None) -> tuple[list[Outcome], list[float]]:
    """Score each completion against its row's tests; also each program's sandbox seconds."""
    setups = setups if setups is not None else [""] * len(completions)
    outcomes: list[Outcome | None] = [None] * len(completions)
    jobs, slots = [], []
    for i, (text, row_tests, setup) in enumerate(zip(completions, tests, setups, strict=True)):
        code, snippets = extract_code(text), test_list(row_tests)
        if not snippets:
            outcomes[i] = Outcome(None, "no tests for this row")
        elif not code.strip():
            outcomes[i] = Outcome(0.0, "no code found")
        else:
            nonce = secrets.token_hex(16)
            jobs.append(build_job(code, snippets, str(setup or ""), nonce))
            slots.append((i, nonce, len(snippets)))
    results = sandbox.run_many(jobs, limits)
    for (i, nonce, n), result in zip(slots, results, strict=True):
        outcomes[i] = judge(result, nonce, n, partial)
    return [o for o in outcomes if o is not None], [r.seconds for r in results]


def unit_tests(partial: bool, timeout: float) -> Any:
    """TRL reward: 1.0 when every test passes (or the share passed, with ``partial``)."""
    limits = sandbox.Limits(wall_seconds=timeout, cpu_seconds=max(1, int(timeout + 0.999)))

    def reward(completions: Sequence[Any], tests: Sequence[Any] | None = None,
               setup: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        if tests is None:
            raise ValueError("unit_tests needs a 'tests' column in the dataset")
        started = time.monotonic()
        outcomes, seconds = run_unit_tests([completion_text(c) for c in completions], tests,
                                           setup, partial=partial, limits=limits)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and seconds:
            log_metric(COST_METRIC, sum(seconds) / len(seconds))
            log_metric(BATCH_METRIC, time.monotonic() - started)
            log_metric(ISOLATION_METRIC, float(sandbox.isolation().namespaces))
        return report(reward, outcomes, kwargs)

    return reward


def code_block_count(count: int) -> Any:
    """TRL reward: 1.0 for exactly ``count`` closed fenced blocks; never looks inside them."""

    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        outcomes = []
        for c in completions:
            found = len(code_blocks(completion_text(c)))
            outcomes.append(Outcome(1.0) if found == count else
                            Outcome(0.0, f"{found} code block(s), wanted {count}"))
        return report(reward, outcomes, kwargs)

    return reward
