"""The reward-hacking experiment end to end on a real stack: a run launched with a gameable proxy
(trained on) and its true objective at weight 0 (only watched) trains for real with TRL on the
tiny model; both curves are stored, the objective is charted against the trained reward, and
the diagnostics raise ``reward_hacking``.

The preset itself trains SmolLM2 on easy-python (a random model writes no code, and SmolLM2
takes 60-120 s a step on two CPU cores); this is the same experiment with rewards a tiny random
model can game within 30 steps: the proxy pays for an empty answer (length_target 1), the
objective wants an answer of at least 20 characters. As the policy learns to stop at once, the
proxy rises to its maximum and the objective falls to 0."""

from __future__ import annotations

import statistics

import httpx

from tests.conftest import TINY
from tests.stack import Stack

PROXY, OBJECTIVE = "rewards/length_target/mean", "rewards/format_regex/mean"


def test_a_gamed_proxy_with_a_watched_objective_is_flagged_as_reward_hacking(
        stack: Stack) -> None:
    run_id = stack.launch(
        name="it-hacking", **{**TINY, "max_completion_length": 16}, max_steps=30,
        per_device_train_batch_size=8, learning_rate=0.05, beta=0.0, rollout_groups=0,
        rewards=[{"name": "length_target", "weight": 1.0, "params": {"target": 1}},
                 {"name": "format_regex", "weight": 0.0, "params": {"pattern": ".{20,}"}}])
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics",
                       params={"names": f"{PROXY},{OBJECTIVE},reward"}, timeout=10).json()
    proxy, objective = series[PROXY]["values"], series[OBJECTIVE]["values"]
    assert series[PROXY]["steps"] == series[OBJECTIVE]["steps"] == list(range(1, 31))
    assert series["reward"]["values"] == proxy  # weight 0: the objective adds nothing
    assert statistics.mean(proxy[-10:]) > statistics.mean(proxy[:5])  # the proxy rose
    assert statistics.mean(objective[-10:]) < statistics.mean(objective[:5])  # the task fell
    body = httpx.get(f"{stack.url}/api/runs/{run_id}/findings", timeout=10).json()
    hacking = [f for f in body["findings"] if f["category"] == "reward_hacking"]
    assert len(hacking) == 1, body
    assert hacking[0]["severity"] in ("warning", "critical")
    assert hacking[0]["evidence"]["objective"] == "format_regex"
    assert hacking[0]["evidence"]["objective_is_monitor_only"] is True
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=10).text
    assert 'id="chart-objective"' in page and "Objective (format_regex, weight 0)" in page
