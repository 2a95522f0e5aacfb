"""The run page's figures read well on their own: every axis says what it holds, shares are not
drawn against token counts, titles match what was logged, long lines drop their markers."""

from __future__ import annotations

from typing import Any

from app.charts.figures import MARKERS_UP_TO, run_figures
from app.metrics.series import Series


def series(n: int, *names: str) -> dict[str, Series]:
    return {name: Series(steps=list(range(1, n + 1)), values=[0.1] * n) for name in names}


def by_key(charts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in charts}


def test_the_clipped_ratio_is_a_share_on_its_own_chart() -> None:
    charts = by_key(run_figures(series(5, "completions/mean_length", "completions/clipped_ratio")))
    length = charts["length"]["figure"]
    assert [t["name"] for t in length["data"]] == ["completions/mean_length"]
    assert "yaxis2" not in length["layout"]
    truncated = charts["truncated"]["figure"]
    assert [t["name"] for t in truncated["data"]] == ["completions/clipped_ratio"]
    assert truncated["layout"]["yaxis"]["tickformat"].endswith("%")


def test_every_axis_has_a_title_and_the_right_axis_reads_in_percent() -> None:
    names = ("reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "loss",
             "completions/mean_length", "learning_rate")
    for chart in run_figures(series(5, *names)):
        layout = chart["figure"]["layout"]
        assert layout["xaxis"]["title"]["text"] == "step"
        assert layout["yaxis"]["title"]["text"], chart["key"]
        assert layout["showlegend"] is True  # a single series is named too
        assert layout["hovermode"] == "x unified"
        assert layout["legend"]["y"] > 1  # above the plot: never on the x-axis title
    right = by_key(run_figures(series(5, *names)))["spread"]["figure"]["layout"]["yaxis2"]
    assert right["title"]["text"] and right["tickformat"] == ".0%"
    assert right["tickvals"] == [0, 0.25, 0.5, 0.75, 1]


def test_the_reward_title_mentions_eval_only_when_it_was_logged() -> None:
    assert by_key(run_figures(series(3, "reward")))["reward"]["title"] == "Reward"
    both = by_key(run_figures(series(3, "reward", "eval_reward")))["reward"]["title"]
    assert both == "Reward (train and eval)"


def test_markers_only_up_to_the_threshold_and_log_scale_offered_for_kl_and_grad_norm() -> None:
    short = by_key(run_figures(series(MARKERS_UP_TO, "kl", "loss")))
    long = by_key(run_figures(series(MARKERS_UP_TO + 1, "grad_norm")))
    assert short["kl"]["figure"]["data"][0]["mode"] == "lines+markers"
    assert long["grad_norm"]["figure"]["data"][0]["mode"] == "lines"
    assert short["kl"]["log_toggle"] and long["grad_norm"]["log_toggle"]
    assert not short["loss"]["log_toggle"]


def test_a_monitor_only_objective_is_drawn_against_the_trained_reward_on_one_chart() -> None:
    from app.charts.figures import marks_by_panel
    from app.charts.panels import monitor_only

    spec = {"rewards": [{"name": "code_block_count", "weight": 1.0},
                        {"name": "unit_tests", "weight": 0.0}]}
    objectives = monitor_only(spec)
    assert objectives == ["unit_tests"]
    logged = series(5, "reward", "rewards/code_block_count/mean", "rewards/unit_tests/mean")
    hacking = {"category": "reward_hacking", "severity": "warning", "first_step": 2,
               "last_step": 5, "metric": "rewards/unit_tests/mean"}
    marks = marks_by_panel([hacking], objectives)
    charts = run_figures(logged, marks, objectives)
    assert [c["key"] for c in charts][:3] == ["reward", "objective", "components"]
    objective = by_key(charts)["objective"]
    assert objective["title"] == "Objective (unit_tests, weight 0) vs trained reward"
    assert [t["name"] for t in objective["figure"]["data"]] == ["reward",
                                                                 "rewards/unit_tests/mean"]
    assert [s["x0"] for s in objective["figure"]["layout"]["shapes"]] == [2]  # the finding
    assert "objective" not in by_key(run_figures(logged))  # a run without one: no such chart
    assert monitor_only({"model_name": "outside script"}) == []


def test_user_text_in_names_is_escaped_for_plotly_and_the_metric_kept() -> None:
    """plotly reads <b>, <a href> in trace names as markup: a metric name is shown as typed."""
    from app.charts.figures import run_figures
    from app.metrics.series import Series

    name = "rewards/<b>bold</b>&co/mean"
    charts = run_figures({"reward": Series([1, 2], [0.1, 0.2]), name: Series([1, 2], [0.3, 0.4])})
    traces = [t for c in charts for t in c["figure"]["data"]]
    mine = next(t for t in traces if t["legendgroup"] == name)
    assert mine["name"] == "rewards/&lt;b&gt;bold&lt;/b&gt;&amp;co/mean"
