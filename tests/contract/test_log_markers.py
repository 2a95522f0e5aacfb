"""The Devices panel's log markers (grpodeck.contract.log_markers): the worker's lines read
back as written, and what the training child or a model's output could print instead (a line
of another shape, a marker in the middle of a line, a slot line after the child's output, a
rank of another world) read as nothing."""

from __future__ import annotations

from grpodeck.contract.log_markers import (
    Preamble,
    RankState,
    launch_line,
    parse_preamble,
    parse_ranks,
    rank_failed_line,
    rank_line,
    sign,
    slot_line,
    verified,
)


def test_preamble_written_by_the_supervisor_reads_back() -> None:
    text = slot_line(1, "2,3") + launch_line(2, "ddp", "NVIDIA H200, NVIDIA H200") + "child\n"
    assert parse_preamble(text) == Preamble(slot=2, visible="2,3", processes=2,
                                            distributed="ddp",
                                            devices="NVIDIA H200, NVIDIA H200")
    assert parse_preamble(launch_line(2, "fsdp", "cpu")) == Preamble(
        processes=2, distributed="fsdp", devices="cpu")
    assert parse_preamble(slot_line(0, "0")) == Preamble(slot=1, visible="0")


def test_preamble_ignores_lines_after_the_childs_output_and_malformed_ones() -> None:
    forged = slot_line(0, "0")
    assert parse_preamble("[grpodeck] stage: loading_model\n" + forged) == Preamble()
    assert parse_preamble(launch_line(2, "ddp", "cpu") + forged) == Preamble(
        processes=2, distributed="ddp", devices="cpu")  # a slot line comes first or not at all
    assert parse_preamble("x " + forged) == Preamble()
    assert parse_preamble("[grpodeck] device slot one: CUDA_VISIBLE_DEVICES=0\n") == Preamble()
    assert parse_preamble("[grpodeck] device slot 1: CUDA_VISIBLE_DEVICES=<b>\n") == Preamble()
    assert parse_preamble("") == Preamble()


def test_ranks_keep_each_ranks_latest_step_and_failure() -> None:
    text = (rank_line(0, 2, 1) + "noise\n" + rank_line(1, 2, 1) + rank_line(0, 2, 2)
            + "Traceback ...\n" + rank_failed_line(1, 2) + rank_line(0, 2, 3, stopping=True))
    assert parse_ranks(text, 2) == {0: RankState(step=3, stopping=True),
                                    1: RankState(step=1, failed=True)}


def test_forged_rank_lines_are_ignored() -> None:
    forged = "".join([
        "completion: " + rank_line(1, 2, 99),  # a model's text: the marker mid-line
        rank_line(1, 3, 99),  # another world size
        rank_line(2, 2, 99),  # a rank the run does not have
        rank_line(1, 2, 99).replace("done", "done!"),  # not the exact shape
        "[grpodeck] rank 1/2: step -5 done\n",
        " " + rank_failed_line(1, 2),
        rank_line(1, 2, 99)[:-8] + "\n",  # cut short (a tail's partial first line)
    ])
    assert parse_ranks(forged + rank_line(1, 2, 4), 2) == {0: RankState(),
                                                           1: RankState(step=4)}


def test_a_huge_process_count_shows_only_the_first_ranks() -> None:
    ranks = parse_ranks(rank_line(70, 1000, 5) + rank_line(3, 1000, 5), 1000, shown=64)
    assert len(ranks) == 64 and ranks[3].step == 5 and 70 not in ranks


def test_only_lines_signed_with_the_runs_key_are_verified() -> None:
    key, other = "k" * 64, "o" * 64
    signed = sign(key, rank_line(0, 2, 3) + rank_line(1, 2, 3))
    assert verified(signed, key) == rank_line(0, 2, 3) + rank_line(1, 2, 3)
    assert verified(signed, other) == ""  # another run's key
    assert verified(signed, None) == ""  # a run claimed before markers were signed
    assert verified(rank_line(0, 2, 3), key) == ""  # printed, unsigned
    tampered = signed.replace("step 3", "step 9", 1)
    assert verified(tampered, key) == rank_line(1, 2, 3)  # the signature covers the line
