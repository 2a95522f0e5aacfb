"""The run page's Devices panel (issue 26) from a run's stored log, through the report API as
the worker sends it: a two-process run shows its processes, devices and each rank's latest
step, polled while live; a rank named in the run's error shows failed; what the log says is
escaped; only rank lines and the preamble the supervisor signed count (a printed or forged one
is log text, issue 55: tests/app/test_devices_trust.py); a single-process run shows only the
device slot it got, and nothing without one."""

from __future__ import annotations

from fastapi.testclient import TestClient

from grpodeck.contract.log_markers import PREAMBLE_END, launch_line, rank_line, sign, slot_line
from tests.app.conftest import html, one, queued_run, running_run

TWO = {"num_processes": 2, "distributed": "ddp", "mixed_precision": "bf16"}


def send(client: TestClient, run_id: int, headers: dict[str, str], stream: str, offset: int,
         text: str) -> None:
    reply = client.post(f"/api/runs/{run_id}/logs", headers=headers,
                        json={"chunks": [{"stream": stream, "offset": offset, "text": text}]})
    assert reply.status_code == 200, reply.text


def facts(page: str) -> dict[str, str]:
    panel = one(page, "#devices-panel")
    return {d.dt.get_text(): d.dd.get_text() for d in panel.select("#device-facts > div")}


def rows(page: str) -> dict[str, tuple[str, str]]:
    return {tr.th.get_text(): tuple(td.get_text().strip() for td in tr.select("td"))
            for tr in one(page, "#rank-table").select("tbody tr")}


def claimed(client: TestClient, **spec: object) -> tuple[int, dict[str, str], str]:
    """A run claimed as the supervisor claims it: (id, its token's headers, its marker key)."""
    run_id, ticket = queued_run(**spec)
    reply = client.post(f"/api/runs/{run_id}/claim", json={"pid": 1, "host": "test"},
                        headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    key = reply.json()["marker_key"]
    assert len(key) == 64
    return run_id, {"Authorization": f"Bearer {reply.json()['token']}"}, key


def test_two_process_run_shows_devices_and_each_ranks_step(client: TestClient) -> None:
    run_id, headers, key = claimed(client, **TWO)
    preamble = slot_line(0, "0,1") + launch_line(2, "ddp", "<b>GPU</b>, <b>GPU</b>")
    send(client, run_id, headers, "stdout", 0, preamble + "[grpodeck] stage: loading_model\n"
         + rank_line(1, 2, 50))  # a rank line on stdout: a model's output, not a rank's
    ranks = rank_line(0, 2, 1) + rank_line(1, 2, 1) + rank_line(0, 2, 2)
    send(client, run_id, headers, "stderr", 0, ranks)  # what people read in the log
    signed = sign(key, preamble + PREAMBLE_END + ranks)
    send(client, run_id, headers, "markers", 0, signed)  # what the supervisor vouches for
    page = client.get(f"/runs/{run_id}").text
    assert facts(page) == {"Processes": "2", "Distributed": "ddp", "Mixed precision": "bf16",
                           "Devices": "slot 1: CUDA_VISIBLE_DEVICES=0,1",
                           "Worker devices": "<b>GPU</b>, <b>GPU</b>"}
    assert "<b>GPU</b>" not in page  # shown as text, never as markup
    assert rows(page) == {"0": ("2", "training"), "1": ("1", "training")}
    assert one(page, "#devices-panel")["hx-get"] == f"/runs/{run_id}/_devices"
    more = sign(key, rank_line(1, 2, 3, stopping=True))
    send(client, run_id, headers, "markers", len(signed.encode()), more)
    fragment = client.get(f"/runs/{run_id}/_devices").text
    assert rows(fragment) == {"0": ("2", "training"), "1": ("3", "stopping")}
    reply = client.post(f"/api/runs/{run_id}/finished", headers=headers, json={
        "returncode": 1, "error": "rank 1: RuntimeError: out of memory"})
    assert reply.status_code == 200, reply.text
    page = client.get(f"/runs/{run_id}").text
    assert rows(page) == {"0": ("2", "ended"), "1": ("3", "failed")}
    assert not one(page, "#devices-panel").has_attr("hx-get")  # ended: no more polling


def test_rank_lines_user_code_prints_or_posts_are_plain_log_text(client: TestClient) -> None:
    """Issue 33: a reward printing ``[grpodeck] rank 0/2: step 999 done`` was believed. Now
    only lines the supervisor signed count: printed ones, unsigned ones and ones signed with
    another key (the token holder does not know the run's) are shown as log text only."""
    run_id, headers, key = claimed(client, **TWO)
    signed = sign(key, rank_line(0, 2, 4) + rank_line(1, 2, 4))
    send(client, run_id, headers, "markers", 0, signed)
    printed = "reward says hi\n" + rank_line(0, 2, 999) + rank_line(1, 2, 0) + rank_line(
        1, 2, 999, stopping=True)
    send(client, run_id, headers, "stderr", 0, printed)
    send(client, run_id, headers, "stdout", 0, rank_line(0, 2, 998))
    offset = len(signed.encode())
    for forged in (rank_line(0, 2, 997), sign("0" * 64, rank_line(1, 2, 996)),
                   sign(key, rank_line(0, 2, 5))[:-3] + "00\n"):
        send(client, run_id, headers, "markers", offset, forged)
        offset += len(forged.encode())
    assert rows(client.get(f"/runs/{run_id}").text) == {"0": ("4", "training"),
                                                        "1": ("4", "training")}
    logs = client.get(f"/runs/{run_id}/logs.txt").text
    assert "[grpodeck] rank 0/2: step 999 done" in logs  # shown, as what it is: log text
    assert " ~" not in logs  # the signed stream is the panel's, not the Logs tab's


def test_single_process_run_shows_its_slot_or_no_panel(client: TestClient) -> None:
    plain, headers = running_run(client)
    send(client, plain, headers, "stdout", 0,
         "[grpodeck] stage: loading_model\n" + slot_line(0, "0"))  # not the supervisor's
    assert not html(client.get(f"/runs/{plain}").text).select("#devices-panel")
    assert client.get(f"/runs/{plain}/_devices").text.strip() == ""
    on_gpu, headers, key = claimed(client)
    send(client, on_gpu, headers, "stdout", 0, slot_line(1, "1") + "hello\n")
    send(client, on_gpu, headers, "markers", 0, sign(key, slot_line(1, "1") + PREAMBLE_END))
    page = client.get(f"/runs/{on_gpu}").text
    assert facts(page) == {"Devices": "slot 2: CUDA_VISIBLE_DEVICES=1"}
    assert not html(page).select("#rank-table")
