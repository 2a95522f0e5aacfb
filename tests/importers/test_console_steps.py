"""Console logs: which printed dicts count as metrics, the widest literal on a line, and each
step-inference rule with its edge (the rule that applies first wins)."""

from __future__ import annotations

import pytest

from app.importers import LogFormatError
from app.importers.console import (
    _bar_steps,
    _is_metrics_dict,
    _literal_at,
    _total_steps,
    looks_like,
    parse,
)


def row(**metrics: object) -> str:
    return repr({"loss": 0.0, "reward": 0.5, **metrics})


SUMMARY_20 = ("{'train_runtime': 80.0, 'train_steps_per_second': 0.25, 'train_loss': 0.0, "
              "'epoch': 1.0}")


@pytest.mark.parametrize("d,ok", [
    ({"loss": 1.0}, True), ({"reward": 1.0}, True), ({"kl": 1.0}, True),
    ({"entropy": 1.0}, True), ({"grad_norm": 1.0}, True), ({"train_runtime": 1.0}, True),
    ({"rewards/acc": 1.0}, True), ({"eval_reward": 1.0}, True),
    ({"REWARDS/acc": 1.0}, False), ({"EVAL_x": 1.0}, False),
    ({"bos_token_id": 1}, False), ({}, False), ({1: "loss"}, False),
    ({"loss": 1.0, 2: 3}, False), (["loss"], False), (None, False),
])
def test_which_dicts_are_metrics(d: object, ok: bool) -> None:
    assert _is_metrics_dict(d) is ok


def test_the_widest_parsable_metrics_literal_on_a_line() -> None:
    assert _literal_at("x {'loss': 1.0} y") == {"loss": 1.0}
    nested = "{'loss': 1.0, 'extra': {'a': 1}}"
    assert _literal_at(f"pre {nested} post") == {"loss": 1.0, "extra": {"a": 1}}
    # an unparsable prefix: the next opening brace is tried
    assert _literal_at("{oops {'loss': 2.0}") == {"loss": 2.0}
    assert _literal_at("{'bos_token_id': 1}") is None
    assert _literal_at("no braces") is None
    assert _literal_at("} backwards {") is None
    # two dicts on one line: the literal must reach the last brace, so the second one counts
    assert _literal_at("{'loss': 1.0} and {'kl': 2.0}") == {"kl": 2.0}
    assert _literal_at("{}") is None
    assert _literal_at("{'a': {'loss': 1.0}}") is None  # a nested dict is not a printed row


def test_bar_steps() -> None:
    text = "1/9 [a\r2/9 [b\nD1\n5/9 [c\nD2\n9/9 [d\nD3"
    offsets = [text.index(f"D{i}") for i in (1, 2, 3)]
    assert _bar_steps(text, offsets) == [2, 5, 9]
    assert _bar_steps("D1 1/9 [", [0]) is None  # no bar before the first dict
    mixed = "1/9 [\nD1\n2/8 [\nD2"
    assert _bar_steps(mixed, [mixed.index("D1"), mixed.index("D2")]) is None  # two totals
    still = "3/9 [\nD1\nD2"
    assert _bar_steps(still, [still.index("D1"), still.index("D2")]) is None  # not increasing
    assert _bar_steps("", []) is None  # no totals at all


def test_total_steps() -> None:
    assert _total_steps({"train_runtime": 80.0, "train_steps_per_second": 0.25}) == 20
    assert _total_steps({"train_runtime": "10", "train_steps_per_second": "0.14"}) == 1
    assert _total_steps({"train_runtime": 1.0, "train_steps_per_second": 0.4}) is None
    assert _total_steps({"train_runtime": 1.0}) is None
    assert _total_steps({"train_runtime": "x", "train_steps_per_second": 1}) is None
    assert _total_steps({"train_runtime": None, "train_steps_per_second": 1}) is None
    assert _total_steps(None) is None and _total_steps({}) is None
    assert _total_steps({"train_runtime": 10.0, "train_steps_per_second": 0.25}) == 2  # 2.5


def test_explicit_steps_win() -> None:
    log = parse("\n".join([row(step=3), row(step=7)]), "f.log")
    assert [s for s, _ in log.rows] == [3, 7]
    assert log.meta == {"step_inference": "step", "logging_steps": 4}
    assert log.source_format == "console"


def test_epoch_rule_places_rows_by_epoch_fraction() -> None:
    text = "\n".join([row(epoch=0.25), row(epoch=0.5), row(epoch=1.0), SUMMARY_20])
    log = parse(text, "f.log")
    assert [s for s, _ in log.rows] == [5, 10, 20]
    assert log.meta == {"step_inference": "epoch", "max_steps": 20, "logging_steps": 5}


def test_epoch_rule_uses_the_last_row_without_a_summary_epoch() -> None:
    summary = "{'train_runtime': 80.0, 'train_steps_per_second': 0.25}"
    text = "\n".join([row(epoch=0.1), row(epoch=0.2), row(epoch=0.4), summary])
    assert [s for s, _ in parse(text, "f.log").rows] == [5, 10, 20]


def test_epoch_rule_needs_increasing_epochs_and_a_positive_final() -> None:
    flat = "\n".join([row(epoch=0.01), row(epoch=0.01), row(epoch=0.01), row(epoch=0.01),
                      SUMMARY_20])
    log = parse(flat, "f.log")
    assert log.meta["step_inference"] == "interval" and [s for s, _ in log.rows] == [5, 10, 15, 20]
    zero = "\n".join([row(epoch=0), row(epoch=0), SUMMARY_20.replace("1.0}", "0}")])
    assert parse(zero, "f.log").meta["step_inference"] == "interval"


def test_epoch_rule_rounds_and_starts_at_step_one() -> None:
    text = "\n".join([row(epoch=0.001), row(epoch=0.5), row(epoch=1.0), SUMMARY_20])
    assert [s for s, _ in parse(text, "f.log").rows] == [1, 10, 20]


def test_interval_falls_back_to_logging_steps_when_the_total_does_not_divide() -> None:
    text = f"{row()}\n{row()}\n{row()}\n{SUMMARY_20}"  # 20 steps / 3 rows: uneven
    log = parse(text, "f.log", logging_steps=4)
    assert [s for s, _ in log.rows] == [4, 8, 12]
    assert log.meta == {"step_inference": "interval", "max_steps": 20, "logging_steps": 4}


def test_one_row_has_no_logging_interval() -> None:
    log = parse(row(), "f.log")
    assert log.rows == [(1, {"loss": 0.0, "reward": 0.5})]
    assert log.meta == {"step_inference": "interval"}


def test_only_a_summary_is_an_error_naming_the_file() -> None:
    with pytest.raises(LogFormatError) as err:
        parse(SUMMARY_20, "run.log")
    assert err.value.path == "run.log" and err.value.reason == "no printed metrics dicts found"


def test_looks_like() -> None:
    assert looks_like("noise\r5/9 [\n" + row())
    assert not looks_like("{'bos_token_id': 1}\nplain text")
    assert not looks_like("")


def test_dicts_split_on_carriage_returns_too() -> None:
    text = "1/2 [" + "\r" + row(step=1) + "\r2/2 [\r" + row(step=2)
    assert [s for s, _ in parse(text, "f.log").rows] == [1, 2]


def test_the_summary_epoch_is_the_end_of_training() -> None:
    """Rows stop before the end (the last log at 3/4 of training): the summary's epoch, not
    the last row's, is the end."""
    text = "\n".join([row(epoch=0.25), row(epoch=0.5), row(epoch=0.75), SUMMARY_20])
    log = parse(text, "f.log")
    assert [s for s, _ in log.rows] == [5, 10, 15] and log.meta["step_inference"] == "epoch"


def test_the_first_bar_counts() -> None:
    text = "1/9 [\nD1\n2/9 [\nD2"
    assert _bar_steps(text, [text.index("D1"), text.index("D2")]) == [1, 2]


def test_literal_search_edges() -> None:
    assert _literal_at("{'loss': 1.0}|") == {"loss": 1.0}  # text right after the last brace
    assert _literal_at("{{'loss': 1.0}") == {"loss": 1.0}  # the very next brace is tried
    nested = "{bad {'loss': 1.0, 'x': {'a': 1}}"
    assert _literal_at(nested) == {"loss": 1.0, "x": {"a": 1}}  # the next brace, not the last


def test_epochs_ending_at_zero_never_divide_by_zero() -> None:
    summary = "{'train_runtime': 80.0, 'train_steps_per_second': 0.25}"
    log = parse("\n".join([row(epoch=-0.5), row(epoch=0.0), summary]), "f.log")
    assert log.meta["step_inference"] == "interval" and [s for s, _ in log.rows] == [10, 20]


def test_interval_steps_are_whole_numbers() -> None:
    log = parse("\n".join([row()] * 4 + [SUMMARY_20]), "f.log")
    assert log.meta["logging_steps"] == 5 and type(log.meta["logging_steps"]) is int


def test_a_one_step_training_has_a_total() -> None:
    assert _total_steps({"train_runtime": 4.0, "train_steps_per_second": 0.25}) == 1


def test_a_bar_later_on_the_dicts_own_line_does_not_place_it() -> None:
    text = "\n" * 30 + "1/9 [\n{'loss': 1.0}\nxx 2/9 [ {'loss': 2.0}\n"
    log = parse(text, "f.log")
    assert log.meta["step_inference"] == "interval"  # both dicts follow bar 1: not increasing
