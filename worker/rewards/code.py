"""Code rewards: run a completion's Python against the row's tests in the sandbox.

``unit_tests`` is the true objective of the coding experiments; ``code_block_count`` is the
deliberately hackable proxy (it counts fences and never runs anything).

The dataset row gives ``tests``: one string (the whole test script: pass or fail as one) or a
list of strings (each test on its own, so a share can be scored), plus an optional ``setup``
string run before the completion (HumanEval's ``from typing import List``), and an optional
``entry_point``: the one name the tests take from the completion (see ``borrowed_names``). The
score comes from outside the completion's interpreter: the tests run in a judge process and call
the completion's functions in a separate child over pipes, getting plain data back
(``worker.rewards.harness``).
The judge reports through lines tagged with a random nonce only it knows (read from its stdin),
so nothing the completion prints, patches or exits with can forge a pass: it can only answer.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import secrets
import sys
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


def _used_names(source: str) -> tuple[set[str], set[str]]:
    """Every name a test uses, and those it uses as modules (``math`` in ``math.fabs(x)``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    bases = {n.value.id for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return names, bases


def _is_stub(node: ast.stmt) -> bool:
    """A function the completion is asked to write: only a docstring, imports, pass or ``...``."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return all(isinstance(s, ast.Pass | ast.Import | ast.ImportFrom) or (
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        and (isinstance(s.value.value, str) or s.value.value is ...)) for s in node.body)


def _setup_names(setup: str) -> set[str]:
    """Names the setup defines for good (its stubs are left for the completion to fill)."""
    try:
        tree = ast.parse(setup)
    except (SyntaxError, ValueError):
        return set()
    stubs = {n.name for n in tree.body if _is_stub(n)}  # type: ignore[attr-defined]
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound - stubs


def borrowed_names(tests: Sequence[str], setup: str,
                   entry_point: str | None = None) -> tuple[list[str], list[str]]:
    """(names the tests take from the completion, stdlib modules the judge imports for them).

    Only the entry point (or, for rows without one, the names the tests use that no builtin,
    standard-library module or setup definition provides) comes from the completion: anything
    else the completion binds (``abs``, ``math``, a setup helper) could answer for the tests.
    """
    found = [_used_names(t) for t in tests]
    used = set().union(*(names for names, _ in found))
    bases = set().union(*(attrs for _, attrs in found))
    fixed = _setup_names(setup)
    modules = (used & bases & set(sys.stdlib_module_names)) - fixed  # math.fabs: the real one
    if entry_point:
        return [entry_point], sorted(modules)
    return sorted(used - set(dir(builtins)) - modules - fixed), sorted(modules)


def build_job(code: str, tests: Sequence[str], setup: str, nonce: str,
              entry_point: str | None = None) -> tuple[str, str]:
    """The sandbox's (source, stdin): the judge program, and this row's job on its stdin."""
    names, modules = borrowed_names(tests, setup, entry_point)
    return harness.JUDGE, harness.job(code, list(tests), setup, nonce, names, modules)


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
                   limits: sandbox.Limits | None = None,
                   entry_points: Sequence[Any] | None = None,
                   ) -> tuple[list[Outcome], list[float]]:
    """Score each completion against its row's tests; also each program's sandbox seconds."""
    setups = setups if setups is not None else [""] * len(completions)
    entry_points = entry_points if entry_points is not None else [None] * len(completions)
    outcomes: list[Outcome | None] = [None] * len(completions)
    jobs, slots = [], []
    rows = zip(completions, tests, setups, entry_points, strict=True)
    for i, (text, row_tests, setup, entry) in enumerate(rows):
        code, snippets = extract_code(text), test_list(row_tests)
        if not snippets:
            outcomes[i] = Outcome(None, "no tests for this row")
        elif not code.strip():
            outcomes[i] = Outcome(0.0, "no code found")
        else:
            nonce = secrets.token_hex(16)
            jobs.append(build_job(code, snippets, str(setup or ""), nonce,
                                  str(entry) if entry else None))
            slots.append((i, nonce, len(snippets)))
    results = sandbox.run_many(jobs, limits)
    for (i, nonce, n), result in zip(slots, results, strict=True):
        outcomes[i] = judge(result, nonce, n, partial)
    return [o for o in outcomes if o is not None], [r.seconds for r in results]


def unit_tests(partial: bool, timeout: float) -> Any:
    """TRL reward: 1.0 when every test passes (or the share passed, with ``partial``)."""
    limits = sandbox.Limits(wall_seconds=timeout, cpu_seconds=max(1, int(timeout + 0.999)))

    def reward(completions: Sequence[Any], tests: Sequence[Any] | None = None,
               setup: Sequence[Any] | None = None, entry_point: Sequence[Any] | None = None,
               **kwargs: Any) -> list[float | None]:
        if tests is None:
            raise ValueError("unit_tests needs a 'tests' column in the dataset")
        started = time.monotonic()
        outcomes, seconds = run_unit_tests([completion_text(c) for c in completions], tests,
                                           setup, partial=partial, limits=limits,
                                           entry_points=entry_point)
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
