"""Issue 55: the Devices panel believed device and launch lines found at offset 0 of a run's
stdout, so a script could pose as the Deck's worker: an outside run (``source: external``,
trained by the user's own script) printing ``[grpodeck] device slot 1: ...`` as its first line
got a panel saying so, and so did a launched run on a worker without device slots (nothing of
the supervisor's comes first there) and a token holder posting its own offset-0 chunk. Now the
panel believes only the preamble the supervisor vouched for: the same lines, written to the
run's markers file before the training child starts and shipped signed with the run's marker
key (which neither an outside script nor the training child has), closed by the end line."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from grpodeck.contract.log_markers import (
    MARKERS_FILE,
    PREAMBLE_END,
    Preamble,
    launch_line,
    parse_vouched,
    sign,
    slot_line,
)
from tests.app.conftest import html
from tests.app.test_devices_panel import TWO, claimed, facts, send

FORGED = slot_line(0, "0,1,2,3") + launch_line(2, "ddp", "8x NVIDIA H200") + "hello\n"
EXTERNAL = {"source": "external", "name": "mine",
            "spec": {"model_name": "tiny", "num_generations": 4, "max_steps": 3}}


def _external(client: TestClient, **spec: object) -> tuple[int, dict[str, str]]:
    reply = client.post("/api/runs", json={**EXTERNAL, "spec": {**EXTERNAL["spec"], **spec}})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"], {"Authorization": f"Bearer {reply.json()['token']}"}


def test_an_outside_runs_printed_device_lines_make_no_devices_facts(client: TestClient) -> None:
    single, headers = _external(client)
    send(client, single, headers, "stdout", 0, FORGED)
    assert not html(client.get(f"/runs/{single}").text).select("#devices-panel")
    assert client.get(f"/runs/{single}/_devices").text.strip() == ""
    multi, headers = _external(client, num_processes=2)
    send(client, multi, headers, "stdout", 0, FORGED)
    send(client, multi, headers, "markers", 0, FORGED + PREAMBLE_END)  # it has no key to sign
    shown = facts(client.get(f"/runs/{multi}").text)
    assert "Devices" not in shown and "Worker devices" not in shown, shown
    assert "8x NVIDIA H200" in client.get(f"/runs/{multi}/logs.txt").text  # log text, as printed


def test_a_launched_runs_child_printing_them_first_is_not_believed(client: TestClient) -> None:
    """A worker without device slots writes nothing before the child: its first line is the
    child's. Its token holder posting the stdout chunk at offset 0 is no better."""
    run_id, headers, key = claimed(client)
    send(client, run_id, headers, "markers", 0, sign(key, PREAMBLE_END))  # nothing to vouch for
    send(client, run_id, headers, "stdout", 0, FORGED)
    assert not html(client.get(f"/runs/{run_id}").text).select("#devices-panel")


def test_only_the_signed_preamble_before_its_end_line_counts(client: TestClient) -> None:
    run_id, headers, key = claimed(client, **TWO)
    vouched = sign(key, slot_line(1, "2,3") + launch_line(2, "ddp", "cpu, cpu") + PREAMBLE_END)
    send(client, run_id, headers, "markers", 0, vouched)
    send(client, run_id, headers, "stdout", 0, FORGED)
    shown = facts(client.get(f"/runs/{run_id}").text)
    assert shown["Devices"] == "slot 2: CUDA_VISIBLE_DEVICES=2,3"
    assert shown["Worker devices"] == "cpu, cpu"
    assert parse_vouched(slot_line(0, "0")) == Preamble()  # no end line: not the supervisor's
    assert parse_vouched(PREAMBLE_END + slot_line(0, "0")) == Preamble()  # after it: a rank's


def test_the_worker_vouches_for_what_it_wrote_before_the_child(tmp_path: Path) -> None:
    from worker.tasks import vouch_preamble

    (tmp_path / "stdout.log").write_text(slot_line(0, "0") + launch_line(2, "ddp", "cpu")
                                         + "[grpodeck] --- accelerate.yaml ---\n")
    vouch_preamble(tmp_path)
    written = (tmp_path / MARKERS_FILE).read_text()
    assert written == slot_line(0, "0") + launch_line(2, "ddp", "cpu") + PREAMBLE_END
    (tmp_path / "stdout.log").write_text("")  # a single-process run on a CPU worker
    vouch_preamble(tmp_path)
    assert (tmp_path / MARKERS_FILE).read_text() == PREAMBLE_END
