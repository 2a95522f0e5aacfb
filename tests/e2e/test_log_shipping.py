"""The worker's log shipper against the real web app: the child's output files travel through
the report API in whole lines, with the child's stage, and a resent chunk is stored once."""

from __future__ import annotations

from pathlib import Path

import httpx

from grpodeck.contract.wire import STAGE_PREFIX
from tests.e2e.test_tracker_pages import reporting_run
from tests.stack import Stack
from worker.log_shipper import LogShipper
from worker.run_client import RunClient


def stored_log(live: Stack, run_id: int) -> str:
    reply = httpx.get(f"{live.url}/runs/{run_id}/logs.txt")
    reply.raise_for_status()
    return reply.text


def test_shipper_sends_whole_lines_stage_and_the_rest_at_exit(live: Stack, tmp_path: Path) -> None:
    run_id, headers = reporting_run(live, "shipped-log")
    client = RunClient(live.url, run_id)
    client._http.headers.update(headers)
    shipper = LogShipper(client, tmp_path)
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    stdout.write_text(f"{STAGE_PREFIX}first_step\nstep line, not ended yet")
    stderr.write_text("warming up ✓\n")
    assert shipper.ship()
    assert stored_log(live, run_id) == f"{STAGE_PREFIX}first_step\nwarming up ✓\n"
    page = httpx.get(f"{live.url}/runs/{run_id}").text
    assert "waiting for the first step" in page  # the stage line reached the run
    shipper.offsets["stdout"] = 0  # a resend of what was acknowledged is stored once
    assert shipper.ship()
    assert stored_log(live, run_id).count("first_step") == 1
    shipper.drain()  # the child exited: the unfinished last line goes too
    assert stored_log(live, run_id).endswith("step line, not ended yet")
    client.close()


def test_a_real_run_keeps_its_childs_output_and_stages(live: Stack) -> None:
    """A tiny run through the real worker and training child: its Logs tab holds the child's
    stage lines and TRL's output, stored with the run."""
    run_id = live.launch(name="logged-run", model="builtin:tiny-random",
                         dataset="builtin:short-prompts", num_generations=2, max_steps=2,
                         rewards=[{"name": "length_target", "weight": 1.0,
                                   "params": {"target": 5}}])
    assert live.wait_for(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    log = stored_log(live, run_id)
    for stage in ("loading_model", "first_step", "saving"):
        assert f"{STAGE_PREFIX}{stage}\n" in log, log[-2000:]
    assert "logged-run" in log  # the child's own log line names the run


def test_an_evaluation_reaches_the_run_page_as_a_stage_with_its_batches(
        live: Stack, tmp_path: Path) -> None:
    """Issue 34: the shipper carries "evaluating n/m" to the run page, then back to training."""
    run_id, headers = reporting_run(live, "evaluating-log")
    client = RunClient(live.url, run_id)
    client._http.headers.update(headers)
    shipper = LogShipper(client, tmp_path)
    httpx.post(f"{live.url}/api/runs/{run_id}/metrics", headers=headers,
               json={"rows": [{"step": 1, "metrics": {"reward": 0.1}}]}).raise_for_status()
    stdout = tmp_path / "stdout.log"
    stdout.write_text(f"{STAGE_PREFIX}evaluating 1/12\n{STAGE_PREFIX}evaluating 3/12\n")
    assert shipper.ship()
    assert "evaluating (3 of 12 batches)" in httpx.get(f"{live.url}/runs/{run_id}").text
    with stdout.open("a") as out:
        out.write(f"{STAGE_PREFIX}training\n")
    assert shipper.ship()
    page = httpx.get(f"{live.url}/runs/{run_id}").text
    assert "evaluating (" not in page and "<strong>training</strong>" in page
    client.close()


def test_a_real_run_with_an_eval_split_reports_its_evaluations(live: Stack) -> None:
    """The real child under TRL: each evaluation prints its batches, then "training"."""
    run_id = live.launch(name="eval-run", model="builtin:tiny-random",
                         dataset="builtin:short-prompts", num_generations=2, max_steps=2,
                         eval_split="test", eval_steps=1,
                         rewards=[{"name": "length_target", "weight": 1.0,
                                   "params": {"target": 5}}])
    assert live.wait_for(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    lines = [line for line in stored_log(live, run_id).splitlines()
             if line.startswith(f"{STAGE_PREFIX}evaluating ") or line == f"{STAGE_PREFIX}training"]
    evaluations = [line for line in lines if "evaluating" in line]
    total = int(evaluations[0].rsplit("/", 1)[1])
    assert evaluations[0].endswith(f" 1/{total}")
    assert lines.count(f"{STAGE_PREFIX}training") == 2  # one evaluation per step: 2 steps
    assert lines.count(f"{STAGE_PREFIX}evaluating {total}/{total}") == 2
