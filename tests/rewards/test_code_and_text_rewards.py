"""The issue-10 rewards' values and their zero-reasons, called as TRL calls them (keyword
arguments, ``log_extra``/``log_metric`` callbacks), with the real sandbox for ``unit_tests``."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest

from grpodeck.contract.catalog import REWARDS, coerce_params
from grpodeck.contract.kinds import READY_PATTERNS
from grpodeck.contract.spec import RunSpec
from worker.rewards.code import code_block_count, extract_code, unit_tests
from worker.rewards.outcome import reason_column
from worker.rewards.text import answer_match, custom, format_regex


class TrlCallbacks:
    """What TRL 1.16 passes to a reward: log_extra(column, values) and log_metric(name, value)."""

    def __init__(self) -> None:
        self.extra: dict[str, list[Any]] = {}
        self.metrics: dict[str, list[float]] = defaultdict(list)

    def kwargs(self) -> dict[str, Any]:
        return {"log_extra": self.extra.__setitem__, "log_metric": self.metric}

    def metric(self, name: str, value: float) -> None:
        self.metrics[name].append(value)


def named(fn: Any, name: str) -> Any:
    fn.__name__ = name  # what RewardDef.build does: TRL logs rewards/<__name__>/mean
    return fn


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_extract_code_takes_the_last_block_an_unclosed_tail_or_the_whole_text() -> None:
    assert extract_code("a\n```python\nx = 1\n```\nb\n```\ny = 2\n```") == "y = 2"
    assert extract_code("sure:\n```python\ndef f():\n    return 1") == "def f():\n    return 1"
    assert extract_code("def f():\n    return 1\n") == "def f():\n    return 1"


def test_unit_tests_scores_passes_failures_and_keeps_reasons() -> None:
    trl = TrlCallbacks()
    fn = named(unit_tests(partial=False, timeout=5.0), "unit_tests")
    completions = [chat("```python\ndef add(a, b):\n    return a + b\n```"),
                   chat("```python\ndef add(a, b):\n    return a - b\n```"),
                   chat("```python\ndef add(a, b) return\n```"),
                   chat("   "),
                   chat("```python\nundefined_name\n```")]
    tests = [["assert add(1, 2) == 3", "assert add(0, 0) == 0"]] * 5
    assert fn(prompts=["p"] * 5, completions=completions, tests=tests, **trl.kwargs()) == [
        1.0, 0.0, 0.0, 0.0, 0.0]
    reasons = trl.extra[reason_column("unit_tests")]
    assert reasons[0] is None
    assert reasons[1] == "failed test 1/2: assert failed"
    assert reasons[2].startswith("syntax error: ")
    assert reasons[3] == "no code found"
    assert reasons[4] == "crashed: NameError: name 'undefined_name' is not defined"
    # The sandbox's cost is reported for the four programs that ran.
    assert len(trl.metrics["sandbox/seconds_per_completion"]) == 1
    assert 0 < trl.metrics["sandbox/seconds_per_completion"][0] < 5


def test_unit_tests_partial_scores_the_share_and_setup_runs_first() -> None:
    fn = named(unit_tests(partial=True, timeout=5.0), "unit_tests")
    code = "```python\ndef head(xs: List[int]) -> int:\n    return xs[0]\n```"
    tests = [["assert head([1]) == 1", "assert head([]) is None", "assert head([2, 3]) == 2",
              "assert head([5]) == 6"]]
    out = fn(prompts=["p"], completions=[code], tests=tests, setup=["from typing import List"])
    assert out == [0.5]
    # A single test string is all-or-nothing; a row without tests is unscorable (None).
    whole = named(unit_tests(partial=True, timeout=5.0), "unit_tests")
    assert whole(prompts=["p", "p"], completions=["def f(): return 1"] * 2,
                 tests=["assert f() == 1\nassert f() == 2", ""]) == [0.0, None]


def test_unit_tests_without_a_tests_column_says_so() -> None:
    with pytest.raises(ValueError, match="'tests' column"):
        unit_tests(partial=False, timeout=1.0)(prompts=["p"], completions=["x"])


def test_code_block_count_rewards_exactly_k_fences_and_ignores_correctness() -> None:
    trl = TrlCallbacks()
    fn = named(code_block_count(2), "code_block_count")
    texts = ["```\nnonsense(\n```\n```python\n1/0\n```", "```\nx\n```", "no code", "```\nopen"]
    assert fn(prompts=["p"] * 4, completions=texts, **trl.kwargs()) == [1.0, 0.0, 0.0, 0.0]
    assert trl.extra[reason_column("code_block_count")] == [
        None, "1 code block(s), wanted 2", "0 code block(s), wanted 2", "0 code block(s), wanted 2"]


def test_format_regex_is_anchored_and_has_ready_patterns() -> None:
    fn = named(format_regex("think-answer"), "format_regex")
    good = "<think>\nsteps\n</think>\n<answer>42</answer>"
    assert fn(prompts=["p"] * 3, completions=[good, good + " trailing", "<answer>42</answer>"]) == [
        1.0, 0.0, 0.0]
    assert READY_PATTERNS["answer-only"]
    plain = named(format_regex(r"\d+"), "format_regex")
    assert plain(prompts=["p"] * 2, completions=["123", "x123"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="regular expression"):
        format_regex("(unclosed")


@pytest.mark.timeout(60)  # without the time limit this test hangs for minutes, then fails
def test_a_catastrophic_format_pattern_costs_a_second_per_completion_and_scores_zero() -> None:
    """A user's pattern meets the model's text: ``(a|aa)+$`` backtracks exponentially on
    "aaa...b". The check gives up after its time limit instead of stalling the training step."""
    trl = TrlCallbacks()
    fn = named(format_regex(r"(a|aa)+$"), "format_regex")
    scores = fn(prompts=["p"] * 3, completions=["a" * 60 + "b", "aaaa", "a" * 60 + "b"],
                **trl.kwargs())
    assert scores == [0.0, 1.0, 0.0]
    assert trl.extra[reason_column("format_regex")] == [
        "format check timed out after 1 s", None, "format check timed out after 1 s"]


def test_answer_match_exact_and_numeric() -> None:
    trl = TrlCallbacks()
    numeric = named(answer_match("numeric", "answer"), "answer_match")
    texts = ["so it is 1,000.0", "<answer>12</answer> not 13", "7", "no digits"]
    assert numeric(prompts=["p"] * 4, completions=texts, answer=["1000", "12", "8", "1"],
                   **trl.kwargs()) == [1.0, 1.0, 0.0, 0.0]
    assert trl.extra[reason_column("answer_match")][2:] == ["answer '7', expected '8'",
                                                           "no answer found"]
    exact = named(answer_match("exact", "label"), "answer_match")
    assert exact(prompts=["p"] * 2, completions=["thinking\nParis", "<answer> Rome </answer>"],
                 label=["Paris", "Paris"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="'label' column"):
        exact(prompts=["p"], completions=["x"])


def test_custom_imports_a_worker_function_and_calls_it_like_trl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fn = custom("tests.rewards.custom_reward:shout")
    assert fn(prompts=["p", "p"], completions=["HEY", "hey"]) == [1.0, 0.0]
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", "tests.rewards.custom_reward")  # a prefix
    with pytest.raises(ValueError, match="not importable"):
        custom("tests.rewards.custom_reward:missing")
    with pytest.raises(ValueError, match="like package.module:function"):
        custom("os.system('x')")


@pytest.mark.parametrize(("name", "params", "message"), [
    ("format_regex", {"pattern": "(x"}, "format_regex.pattern must be a valid regular expression"),
    ("unit_tests", {"partial": "maybe"}, "unit_tests.partial must be true or false"),
    ("unit_tests", {"timeout": 0}, "unit_tests.timeout must be at least 0.5"),
    ("custom", {}, "custom.path must be like package.module:function"),
    ("custom", {"path": "__import__('os').system"}, "custom.path must be like"),
    ("answer_match", {"mode": "fuzzy"}, "answer_match.mode must be one of exact, numeric"),
    ("answer_match", {"column": "a b"}, "answer_match.column must be a dataset column name"),
    ("code_block_count", {"count": -1}, "code_block_count.count must be at least 0"),
])
def test_the_spec_refuses_bad_parameters_with_the_reason(name: str, params: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        coerce_params(REWARDS[name], params)


def test_parameters_from_the_form_parse_as_text() -> None:
    assert coerce_params(REWARDS["unit_tests"], {"partial": "false", "timeout": "2"}) == {
        "partial": False, "timeout": 2.0}
    assert coerce_params(REWARDS["unit_tests"], {"partial": "TRUE"})["partial"] is True
    assert coerce_params(REWARDS["format_regex"], {})["pattern"] == READY_PATTERNS["think-answer"]
    assert coerce_params(REWARDS["answer_match"], {}) == {"mode": "numeric", "column": "answer"}


def test_monitor_only_reward_is_a_weight_0_entry_of_the_spec() -> None:
    spec = RunSpec(dataset="builtin:easy-python", rewards=[
        {"name": "code_block_count", "weight": 1.0}, {"name": "unit_tests", "weight": 0.0}])
    assert [r.weight for r in spec.rewards] == [1.0, 0.0]
