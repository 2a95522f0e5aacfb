"""Logs the Deck did not write (issue 23): verl console lines, OpenRLHF rows, a hand-written
loop's ``key: value`` prints, a user's key mapping, and coverage that never says "healthy"
when nothing was read. The logs come from bench/simulated_logs.py (seeded simulations)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.diagnostics import diagnose
from app.importers import load_log
from app.importers.run_config import read_run_config
from app.imports.service import diagnose_path
from bench.simulated_logs import ODD_KEYS, handwritten_stalled, write_all
from grpodeck.client.callback import rows_from_logs

HAND_MAP = ["--map", "Score=reward", "--map", "Div=kl", "--map", "Obj=loss"]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("simulated"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "diagnose", *args],
                          capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture(scope="module")
def odd_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("odd") / "odd.log"
    path.write_text(handwritten_stalled(keys=ODD_KEYS))
    return path


def test_a_log_with_unknown_keys_is_unknown_and_exits_3(odd_log: Path) -> None:
    done = cli(str(odd_log), "--json")
    assert done.returncode == 3, done.stderr
    body = json.loads(done.stdout)
    assert body["verdict"] == "unknown" and body["findings"] == []
    assert body["reason"] == "no reward metric among: Div, Obj, Score"
    assert body["metrics"] == [] and body["unchecked"]["stalled"] == "reward"
    assert body["suggested_map"] == "--map Score=reward"
    text = cli(str(odd_log))
    assert text.returncode == 3 and f"Try: grpodeck diagnose {odd_log} --map Score=reward" \
        in text.stdout


def test_a_hand_written_loops_spellings_are_read_and_shown(logs: dict[str, Path]) -> None:
    """``Reward``, ``KL_ref``, ``Loss``: the loop vocabulary reads them, no --map needed."""
    done = cli(str(logs["handwritten_stalled.log"]), "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["verdict"] == "warning" and body["metrics"] == ["kl", "loss", "reward"]
    assert body["read"]["read_as"] == {"KL_ref": "kl", "Loss": "loss", "Reward": "reward"}
    text = cli(str(logs["handwritten_stalled.log"])).stdout
    assert "Read as: `KL_ref` as kl, `Loss` as loss, `Reward` as reward" in text


def test_a_hand_written_reward_log_is_diagnosed_with_map(odd_log: Path) -> None:
    done = cli(str(odd_log), "--json", *HAND_MAP)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["verdict"] == "warning" and body["metrics"] == ["kl", "loss", "reward"]
    assert "stalled" in {f["category"] for f in body["findings"]}
    assert "kl_level" not in body["unchecked"] and body["unchecked"]["entropy"] == "entropy"


def test_a_malformed_map_is_refused_with_its_reason(logs: dict[str, Path]) -> None:
    done = cli(str(logs["handwritten_stalled.log"]), "--map", "Reward")
    assert done.returncode == 2 and "'Reward' is not KEY=NAME" in done.stderr


def test_a_collapsing_verl_console_log_is_read_and_gets_its_finding(
        logs: dict[str, Path]) -> None:
    log = load_log(logs["verl_collapse.console.log"])
    assert log.source_format == "verl_console" and log.meta["vocabulary"] == "verl"
    assert [s for s, _ in log.rows] == list(range(1, 121))  # Ray prefix, ANSI, np.float64 read
    assert {"reward", "entropy", "kl", "completions/clipped_ratio", "grad_norm"} <= set(
        log.rows[0][1])
    d = diagnose_path(logs["verl_collapse.console.log"])
    collapse = [f for f in d.findings if f.category == "reward_collapse"]
    assert collapse and collapse[0].severity in ("warning", "critical")
    assert "zero_spread" in d.unchecked and "stalled" not in d.unchecked


def test_openrlhf_rows_are_read_in_canonical_names(logs: dict[str, Path]) -> None:
    log = load_log(logs["openrlhf_length.jsonl"])
    assert log.meta["vocabulary"] == "openrlhf" and log.rows[0][0] == 1
    assert {"reward", "kl", "completions/mean_length", "loss"} <= set(log.rows[0][1])
    d = diagnose_path(logs["openrlhf_length.jsonl"])
    assert "length_explosion" in {f.category for f in d.findings if f.severity == "warning"}


def test_score_wins_over_rewards_in_verl_and_a_user_map_wins_over_both(tmp_path: Path) -> None:
    path = tmp_path / "verl.log"
    path.write_text("".join(f"step:{s} - critic/score/mean:0.{s} - critic/rewards/mean:0.0"
                            f" - my/acc:0.5\n" for s in range(1, 4)))
    assert load_log(path).rows[0][1] == {"reward": 0.1, "critic/rewards/mean": 0.0,
                                         "my/acc": 0.5}
    mapped = load_log(path, mapping={"my/acc": "reward"}).rows[0][1]
    assert mapped["reward"] == 0.5 and mapped["critic/score/mean"] == 0.1


def test_key_equals_value_lines_without_steps_count_lines(tmp_path: Path) -> None:
    path = tmp_path / "loop.txt"
    path.write_text("reward=0.1 kl=0.01\nsaving...\nreward=0.2, kl=0.02\n")
    log = load_log(path)
    assert log.source_format == "key_value" and log.meta["step_inference"] == "line"
    assert log.rows == [(1, {"reward": 0.1, "kl": 0.01}), (2, {"reward": 0.2, "kl": 0.02})]


def test_no_reward_but_a_problem_keeps_the_problem_verdict() -> None:
    rows = [(s, {"loss": float("nan") if s > 3 else 0.1}) for s in range(1, 8)]
    d = diagnose(rows)
    assert d.verdict == "critical" and d.reason is None and d.metrics == ["loss"]


def test_the_callback_passes_unknown_keys_through_untouched() -> None:
    logs = {"Reward": 0.5, "critic/score/mean": 0.25, "KL ref (x)": 1, "eval_Custom": 2.0}
    rows = rows_from_logs(7, logs)
    assert rows == [{"step": 7, "metrics": {"Reward": 0.5, "critic/score/mean": 0.25,
                                            "KL ref (x)": 1.0}},
                    {"step": 7, "metrics": {"eval_Custom": 2.0}}]


def test_training_args_are_read_safely_from_an_output_folder(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path), max_completion_length=321, num_generations=4,
                      beta=0.04, report_to="none", use_cpu=True, bf16=False)
    torch.save(args, tmp_path / "training_args.bin")
    config, refused = read_run_config([tmp_path])
    assert refused is None
    assert config["max_completion_length"] == 321 and config["num_generations"] == 4


class Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("pwned",))


def test_a_hostile_training_args_file_is_refused(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.save(Evil(), tmp_path / "training_args.bin")
    config, refused = read_run_config([tmp_path])
    assert config == {} and refused and "not from transformers/TRL" in refused
