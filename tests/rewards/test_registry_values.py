"""The reward functions' values themselves (the numbers GRPO learns from), their parameters,
and the names TRL logs them under. Pure: no model, no trainer."""

from __future__ import annotations

import pytest

from grpodeck.contract.catalog import REWARDS, coerce_params
from grpodeck.contract.text import completion_text
from worker.rewards import registry


def build(name: str, cap: int = 32, **params: object):
    """The reward as the worker builds it for a run whose max_completion_length is ``cap``."""
    return registry.build(name, coerce_params(REWARDS[name], params), cap)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_length_target_is_minus_the_relative_distance() -> None:
    fn = build("length_target", target=10)
    texts = ["x" * 10, "x" * 5, "x" * 15, "", "x" * 30]
    assert fn(prompts=["p"] * 5, completions=texts) == [0.0, -0.5, -0.5, -1.0, -2.0]


def test_length_target_reads_chat_completions_and_defaults_to_20() -> None:
    fn = build("length_target")
    assert fn(prompts=["p"], completions=[chat("y" * 20)]) == [0.0]
    assert fn(prompts=["p"], completions=[chat("y" * 25)]) == [-0.25]


def test_longer_is_worse_past_the_target_and_closer_is_better() -> None:
    fn = build("length_target", target=8)
    scores = fn(completions=["a" * n for n in (8, 9, 12, 20)])
    assert scores == sorted(scores, reverse=True) and scores[0] == 0.0


@pytest.mark.parametrize("text,score", [
    ("3+4=7", 1.0), ("the answer is 7", 1.0), ("7 apples, so 3+4 = 7", 1.0),
    ("7 or maybe 8", 0.0), ("no number", 0.0), ("-7", 0.0), ("7.0", 0.0), ("17", 0.0),
])
def test_exact_answer_compares_the_last_number(text: str, score: float) -> None:
    fn = build("exact_answer")
    assert fn(prompts=["q"], completions=[text], answer=["7"]) == [score]


def test_exact_answer_handles_negative_and_decimal_answers_and_chat() -> None:
    fn = build("exact_answer")
    out = fn(completions=["so -3", "x = 2.5", chat("It is 12"), "2.5 then -3"],
             answer=[-3, " 2.5 ", 12, "2.5"])
    assert out == [1.0, 1.0, 1.0, 0.0]


def test_exact_answer_needs_the_answer_column_and_one_per_completion() -> None:
    fn = build("exact_answer")
    with pytest.raises(ValueError) as err:
        fn(completions=["7"])
    assert str(err.value) == "exact_answer needs an 'answer' column in the dataset"
    with pytest.raises(ValueError):
        fn(completions=["7", "8"], answer=["7"])


def test_format_tag_needs_the_whole_tag() -> None:
    fn = build("format_tag")
    texts = ["<answer>7</answer>", "pre <answer>\nmulti\n</answer> post", "<answer>7",
             "answer 7", "<ANSWER>7</ANSWER>", "</answer>x<answer>"]
    assert fn(completions=texts) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    custom = build("format_tag", tag="think")
    assert custom(completions=["<think>a</think>", "<answer>a</answer>"]) == [1.0, 0.0]
    dotted = build("format_tag", tag="a.b")  # a tag is matched literally, not as a pattern
    assert dotted(completions=["<a.b>x</a.b>", "<axb>x</axb>"]) == [1.0, 0.0]


def test_constant_gives_every_completion_the_same_value() -> None:
    assert build("constant", value=0.25)(completions=["a", "b", "c"]) == [0.25] * 3
    assert build("constant")(completions=["a"]) == [0.0]


def test_debug_raise_counts_its_calls() -> None:
    fn = build("debug_raise", after_calls=2)
    assert fn(completions=["a", "b"]) == [0.0, 0.0]
    assert fn(completions=["a"]) == [0.0]
    with pytest.raises(RuntimeError, match="failed on call 3"):
        fn(completions=["a"])
    with pytest.raises(RuntimeError, match="failed on call 1"):
        build("debug_raise")(completions=["a"])


def test_debug_raise_for_one_rank_spares_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """``rank``: only that process of a run on many devices raises (accelerate sets RANK)."""
    monkeypatch.setenv("RANK", "0")
    assert build("debug_raise", rank=1)(completions=["a"]) == [0.0]
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(RuntimeError, match="failed on call 1"):
        build("debug_raise", rank=1)(completions=["a"])
    monkeypatch.delenv("RANK")  # a single process is rank 0
    with pytest.raises(RuntimeError):
        build("debug_raise", rank=0)(completions=["a"])


def test_built_functions_carry_the_name_trl_logs() -> None:
    needed = {"custom": {"path": "tests.rewards.custom_reward:shout"}}  # no default import path
    for name in REWARDS:
        assert build(name, **needed.get(name, {})).__name__ == name


def test_coerce_params_fills_defaults_and_converts() -> None:
    assert coerce_params(REWARDS["length_target"], {}) == {"target": 20}
    assert coerce_params(REWARDS["length_target"], {"target": "7"}) == {"target": 7}
    assert coerce_params(REWARDS["constant"], {"value": "0.5"}) == {"value": 0.5}
    assert coerce_params(REWARDS["exact_answer"], {}) == {}
    assert coerce_params(REWARDS["debug_raise"], {"after_calls": 0}) == {"after_calls": 0,
                                                                         "rank": -1}
    assert coerce_params(REWARDS["length_target"], {"target": 1}) == {"target": 1}


@pytest.mark.parametrize("name,params,message", [
    ("length_target", {"target": "abc"}, "length_target.target must be a whole number"),
    ("length_target", {"target": None}, "length_target.target must be a whole number"),
    ("length_target", {"target": 0}, "length_target.target must be at least 1"),
    ("debug_raise", {"after_calls": -1}, "debug_raise.after_calls must be at least 0"),
    ("length_target", {"size": 3, "bogus": 1}, "unknown parameter(s) for length_target: bogus, size"),
    ("exact_answer", {"x": 1}, "unknown parameter(s) for exact_answer: x"),
])
def test_coerce_params_names_the_bad_parameter(name: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        coerce_params(REWARDS[name], params)
    assert str(err.value) == message


def test_completion_text_joins_message_contents_without_roles() -> None:
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "a"},
                            {"role": "assistant", "content": "b"}]) == "ab"


def test_overlong_penalty_is_trls_dapo_ramp_over_the_last_fifth_of_the_runs_cap() -> None:
    """Cap 100 (the run's max_completion_length), soft share 0.2: 0 up to 80 tokens, then a
    ramp to -1 at 100, -1 past it (TRL's get_soft_overlong_punishment)."""
    fn = build("overlong_penalty", cap=100)
    ids = [[1] * n for n in (10, 80, 90, 100, 130)]
    assert fn(completions=["x"] * 5, completion_ids=ids) == [0.0, 0.0, -0.5, -1.0, -1.0]
    assert fn.__name__ == "overlong_penalty"


def test_overlong_penalty_with_its_own_cap_and_share() -> None:
    fn = build("overlong_penalty", cap=999, max_length=40, soft_share=0.5)
    assert fn(completions=["x"] * 3, completion_ids=[[0] * 20, [0] * 30, [0] * 41]) == [
        0.0, -0.5, -1.0]


def test_overlong_penalty_without_token_ids_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match="completion_ids"):
        build("overlong_penalty")(completions=["x"])


@pytest.mark.parametrize("params, words", [({"soft_share": 0}, "soft_share"),
                                           ({"soft_share": "nan"}, "soft_share"),
                                           ({"max_length": -1}, "max_length"),
                                           ({"max_length": 10**9}, "max_length")])
def test_overlong_penalty_parameters_out_of_range_are_refused_by_name(
        params: dict[str, object], words: str) -> None:
    from pydantic import ValidationError

    from grpodeck.contract.spec import RunSpec

    with pytest.raises(ValidationError, match=words):
        RunSpec(rewards=[{"name": "overlong_penalty", "params": params}])
