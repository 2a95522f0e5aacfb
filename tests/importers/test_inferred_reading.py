"""Issue 54: readers that infer instead of listing spellings.

A log whose rows carry their step as ``grpo_step`` (or no step at all), split train and eval
rows by a ``type``/``phase`` field or an eval flag, and call the reward ``rollout_reward_mean``
is read without a ``--map``: the step from the column that behaves like one (else the row
order), eval rows as ``eval_*`` series, each column's role from its name's words (and, where it
helps, its values). A max, a min, a spread, an entropy, a length or a count is never the reward.
The user's ``--map`` still wins, and the live path reads the same names (one reading module).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.importers import LogFormatError, load_log
from app.importers.read_report import read_lines, suggested_map
from app.metrics.reading import Reading, read_rows

STEPS = 12
EVAL_EVERY = 4


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def names(path: Path, **kwargs: object) -> set[str]:
    return {k for _, m in load_log(path, **kwargs).rows for k in m}  # type: ignore[arg-type]


def typed_rows() -> list[dict]:
    """A hand-written loop's typed rows: a rollout and a train row per step, an eval row every
    ``EVAL_EVERY`` steps, the step under ``grpo_step``."""
    out: list[dict] = []
    for step in range(1, STEPS + 1):
        out.append({"type": "rollout", "grpo_step": step, "reward_mean": 0.1 * step,
                    "reward_std": 0.2, "response_length_mean": 100.0 + step})
        out.append({"type": "train", "grpo_step": step, "loss": 0.01, "kl": 0.001 * step})
        if step % EVAL_EVERY == 0:
            out.append({"type": "eval", "grpo_step": step, "reward_mean": 0.05 * step})
    return out


# --- 1. the step, from the column that behaves like one or from the row order -------------------

def test_typed_rows_with_grpo_step_are_read_at_that_step(tmp_path: Path) -> None:
    log = load_log(write_jsonl(tmp_path / "loop.jsonl", typed_rows()))
    assert [s for s, _ in log.rows] == list(range(1, STEPS + 1))
    assert log.meta["step_from"] == "grpo_step"
    assert "steps from `grpo_step`" in read_lines(log)[0]
    step4 = dict(log.rows)[4]
    assert step4["reward"] == pytest.approx(0.4) and step4["kl"] == pytest.approx(0.004)
    assert step4["eval_reward"] == pytest.approx(0.2) and "grpo_step" not in step4
    assert "eval_reward" not in dict(log.rows)[3]


@pytest.mark.parametrize("key", ["global_step", "iteration", "iter", "update", "_step",
                                 "optimizer_step"])
def test_any_step_like_column_places_the_rows(tmp_path: Path, key: str) -> None:
    rows = [{key: 10 * i, "reward": 0.1 * i} for i in range(1, 6)]
    log = load_log(write_jsonl(tmp_path / "m.jsonl", rows))
    assert [s for s, _ in log.rows] == [10, 20, 30, 40, 50]
    assert all(key not in m for _, m in log.rows)


def test_rows_without_a_step_take_their_order(tmp_path: Path) -> None:
    rows = [{"reward": 0.1 * i, "kl": 0.01} for i in range(1, 6)]
    for path in (write_jsonl(tmp_path / "m.jsonl", rows), tmp_path / "m.json"):
        path.write_text(json.dumps(rows)) if path.suffix == ".json" else None
        log = load_log(path)
        assert [s for s, _ in log.rows] == [1, 2, 3, 4, 5]
        assert log.meta["step_from"] == "row order"
        assert "steps from the row order" in read_lines(log)[0]


def test_a_column_that_goes_back_or_is_fractional_is_not_the_step(tmp_path: Path) -> None:
    back = [{"iteration": i % 3, "reward": 0.1} for i in range(1, 7)]
    assert load_log(write_jsonl(tmp_path / "a.jsonl", back)).meta["step_from"] == "row order"
    frac = [{"update": i / 2, "reward": 0.1} for i in range(1, 7)]
    assert load_log(write_jsonl(tmp_path / "b.jsonl", frac)).meta["step_from"] == "row order"


def test_one_stepless_dict_is_still_refused(tmp_path: Path) -> None:
    """One dict is a config or a summary, not a run: the reason names the missing step."""
    with pytest.raises(LogFormatError, match="line 1 has no 'step'"):
        load_log(write_jsonl(tmp_path / "one.jsonl", [{"reward": 0.5}]))


def test_map_names_the_step_key(tmp_path: Path) -> None:
    rows = [{"t": 5 * i, "reward": 0.1 * i} for i in range(1, 5)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    log = load_log(path, mapping={"t": "step"})
    assert [s for s, _ in log.rows] == [5, 10, 15, 20] and log.meta["step_from"] == "t"
    assert all("t" not in m and "step" not in m for _, m in log.rows)
    done = cli(path, "--json", "--map", "t=step")
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)["read"]
    assert read["last_step"] == 20 and read["step_from"] == "t"


def test_map_names_a_step_key_the_rows_lack_with_a_clear_reason(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"t": 1, "reward": 0.1}, {"reward": 0.2}])
    with pytest.raises(LogFormatError, match="line 2 has no 't'"):
        load_log(path, mapping={"t": "step"})


# --- 2. train and eval rows at the same step -----------------------------------------------------

@pytest.mark.parametrize("marker", [{"split": "validation"}, {"mode": "val"}, {"phase": "test"},
                                    {"type": "eval"}, {"eval": True}, {"is_eval": True},
                                    {"split": "valid"}])
def test_eval_rows_become_eval_series(tmp_path: Path, marker: dict) -> None:
    rows = [{"step": s, "reward": 0.1 * s, "loss": 0.5} for s in range(1, 5)]
    rows.insert(2, {"step": 2, "accuracy": 0.7, "loss": 0.9, **marker})
    log = load_log(write_jsonl(tmp_path / "m.jsonl", rows))
    at2 = dict(log.rows)[2]
    assert at2["loss"] == 0.5 and at2["eval_loss"] == 0.9 and at2["eval_reward"] == 0.7
    assert at2["reward"] == pytest.approx(0.2)


def test_rollout_and_train_rows_merge_at_their_step(tmp_path: Path) -> None:
    rows = [{"phase": "rollout", "step": 1, "reward": 0.3},
            {"phase": "training", "step": 1, "loss": 0.1}]
    rows += [{"phase": "rollout", "step": 2, "reward": 0.4}]
    log = load_log(write_jsonl(tmp_path / "m.jsonl", rows))
    assert log.rows == [(1, {"reward": 0.3, "loss": 0.1}), (2, {"reward": 0.4})]


# --- 3. each column's role, from its name ----------------------------------------------------------

def loop_rows(steps: int = 60) -> list[dict]:
    """The issue's log: no TRL name, the eval accuracy null except on eval steps."""
    return [{"step": s, "rollout_reward_mean": 0.2 + 0.005 * s, "rollout_reward_std": 0.3,
             "rollout_reward_max": 1.0, "rollout_reward_min": 0.0,
             "gradient_norm": 0.5, "mean_response_length": 200.0 + s,
             "val_accuracy": 0.4 + 0.001 * s if s % 10 == 0 else None} for s in range(1, steps + 1)]


def test_the_issues_log_is_read_without_a_map(tmp_path: Path) -> None:
    log = load_log(write_jsonl(tmp_path / "loop.jsonl", loop_rows()))
    assert log.renames == {"rollout_reward_mean": "reward", "rollout_reward_std": "reward_std",
                           "rollout_reward_max": "reward_max",  # the batch's best, not the reward
                           "rollout_reward_min": "reward_min",
                           "gradient_norm": "grad_norm",
                           "mean_response_length": "completions/mean_length",
                           "val_accuracy": "eval_reward"}
    assert "Read as: `gradient_norm` as grad_norm" in read_lines(log)[1]
    assert "`rollout_reward_mean` as reward" in read_lines(log)[1]


def cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(path), *args],
                          capture_output=True, text=True, check=False, timeout=120)


def test_diagnose_no_longer_says_unknown(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "loop.jsonl", loop_rows())
    done = cli(path, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["verdict"] != "unknown"
    assert {"reward", "reward_std", "grad_norm", "completions/mean_length",
            "eval_reward"} <= set(body["metrics"])


@pytest.mark.parametrize("key,name", [
    ("reward_mean", "reward"), ("avg_score", "reward"), ("train/reward", "reward"),
    ("rollout_reward_std", "reward_std"), ("rollout_reward_max", "reward_max"),
    ("min_reward", "reward_min"),
    ("format_reward", "rewards/format_reward/mean"),
    ("reward_correctness", "rewards/reward_correctness/mean"),
    ("correctness_reward_std", "rewards/correctness_reward/std"),
    ("val_accuracy", "eval_reward"), ("test_acc", "eval_reward"), ("eval_score", "eval_reward"),
    ("eval_ndcg@10", "eval_reward"), ("val/pass@1", "eval_reward"), ("val_loss", "eval_loss"),
    ("policy_entropy", "entropy"), ("avgEntropy", "entropy"),
    ("kl", "kl"), ("kl_div", "kl"), ("approx_kl", "kl"), ("mean_kl_to_ref", "kl"),
    ("mean_response_length", "completions/mean_length"),
    ("avg_completion_len", "completions/mean_length"),
    ("max_response_length", "completions/max_length"),
    ("completion_tokens", "completions/mean_length"),
    ("truncated_frac", "completions/clipped_ratio"),
    ("completion_clip_ratio", "completions/clipped_ratio"),
    ("gradient_norm", "grad_norm"), ("grad_norm", "grad_norm"), ("gnorm", "grad_norm"),
    ("lr", "learning_rate"), ("actor_lr", "learning_rate"), ("policy_loss", "loss"),
    # shapes seen in real logs (tests/corpus): trackers' prefixes, table headers kept verbatim
    ("train/rewards/accuracy_reward", "rewards/accuracy_reward/mean"),
    ("rewards / xmlcount_reward_func", "rewards/xmlcount_reward_func/mean"),
    ("reward/f", "rewards/f/mean"), ("Training Loss", "loss"), ("GradN", "grad_norm"),
    ("degenerate_frac", "frac_reward_zero_std"),
    ("zero_advantage_fraction", "frac_reward_zero_std"), ("eval/math", "eval_reward"),
    ("val-aux/aime_2024/reward/best@16/mean", "eval_reward"),
])
def test_a_columns_role_comes_from_its_words(tmp_path: Path, key: str, name: str) -> None:
    rows = [{"step": s, key: 0.1 * s, "other": 1.0} for s in range(1, 5)]
    assert name in names(write_jsonl(tmp_path / "m.jsonl", rows))


@pytest.mark.parametrize("key", ["rollout_reward_max", "reward_min", "reward_var", "Ent",
                                 "response_length", "reward_count", "reward_time_s",
                                 "nonzero_reward_ratio", "kl_coef", "KL%", "score",
                                 "rewards_sum", "prompt_length_mean", "kl_dominance_ratio",
                                 "total_completion_tokens"])
def test_never_read_as_the_reward(tmp_path: Path, key: str) -> None:
    rows = [{"step": s, key: 0.1 * s} for s in range(1, 5)]
    read = names(write_jsonl(tmp_path / "m.jsonl", rows))
    assert "reward" not in read and not any(n.startswith("rewards/") for n in read)


def test_a_share_of_the_loss_is_not_the_kl_and_a_step_is_no_metric(tmp_path: Path) -> None:
    rows = [{"Step": s, "kl_dominance_ratio": 0.9, "train/step": s} for s in range(1, 5)]
    log = load_log(write_jsonl(tmp_path / "m.jsonl", rows))
    assert log.meta["step_from"] == "Step" and log.renames == {}


def test_a_ratio_out_of_range_is_not_a_clipped_ratio(tmp_path: Path) -> None:
    rows = [{"step": s, "truncated_frac": 3.0 * s} for s in range(1, 5)]
    assert "completions/clipped_ratio" not in names(write_jsonl(tmp_path / "m.jsonl", rows))


def test_accuracy_stands_for_the_reward_only_without_one(tmp_path: Path) -> None:
    alone = [{"step": s, "accuracy": 0.1 * s} for s in range(1, 6)]
    assert "reward" in names(write_jsonl(tmp_path / "a.jsonl", alone))
    both = [{"step": s, "accuracy": 0.1 * s, "reward_mean": 0.2} for s in range(1, 6)]
    log = load_log(write_jsonl(tmp_path / "b.jsonl", both))
    assert log.renames == {"reward_mean": "reward"}
    with_component = [{"step": s, "accuracy": 0.1, "format_reward": 0.2} for s in range(1, 6)]
    assert load_log(write_jsonl(tmp_path / "c.jsonl", with_component)).renames == {
        "format_reward": "rewards/format_reward/mean"}


def test_a_column_only_on_some_steps_is_an_eval_series(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": 0.1, **({"accuracy": 0.5} if s % 5 == 0 else {})}
            for s in range(1, 21)]
    log = load_log(write_jsonl(tmp_path / "m.jsonl", rows))
    assert log.renames == {"accuracy": "eval_reward"}


def test_one_eval_score_is_picked_reward_before_accuracy_before_score(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": 0.1, "val_score": 0.3, "val_accuracy": 0.5,
             "eval_ndcg@10": 0.2} for s in range(1, 5)]
    log = load_log(write_jsonl(tmp_path / "a.jsonl", rows))
    assert log.renames == {"val_accuracy": "eval_reward"}
    rows = [{**r, "val_reward_mean": 0.4} for r in rows]
    assert load_log(write_jsonl(tmp_path / "b.jsonl", rows)).renames == {
        "val_reward_mean": "eval_reward"}


def test_the_users_map_overrides_what_is_inferred(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "loop.jsonl", loop_rows(10))
    log = load_log(path, mapping={"rollout_reward_max": "reward"})
    assert log.renames["rollout_reward_max"] == "reward"
    assert "rollout_reward_mean" not in log.renames  # the name is the user's key's
    assert dict(log.rows)[3]["reward"] == 1.0


def test_the_live_path_reads_the_same_names() -> None:
    rows = [(s, {k: v for k, v in r.items() if k != "step" and v is not None})
            for s, r in enumerate(loop_rows(20), 1)]
    _, reading = read_rows(rows, Reading.start())
    assert reading.renames == {"rollout_reward_mean": "reward",
                               "rollout_reward_std": "reward_std",
                               "rollout_reward_max": "reward_max",
                               "rollout_reward_min": "reward_min",
                               "gradient_norm": "grad_norm",
                               "mean_response_length": "completions/mean_length",
                               "val_accuracy": "eval_reward"}
    _, pinned = read_rows(rows, Reading.start("trl"))  # TRL's names only: nothing inferred
    assert pinned.renames == {}


def test_trl_names_are_left_as_they_are(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": 0.2, "reward_std": 0.1, "kl": 0.0, "entropy": 0.5,
             "frac_reward_zero_std": 0.1, "clip_ratio/low_mean": 0.0, "clip_ratio": 0.1,
             "completions/mean_length": 100.0, "rewards/format_reward/mean": 0.3,
             "num_tokens": 1000.0, "eval_reward": 0.1, "eval_runtime": 2.0,
             "learning_rate": 1e-6, "grad_norm": 0.3, "loss": 0.0, "epoch": 0.1}
            for s in range(1, 4)]
    assert load_log(write_jsonl(tmp_path / "m.jsonl", rows)).renames == {}


# --- 4. suggested_map ------------------------------------------------------------------------------

def test_suggested_map_never_proposes_a_max_min_spread_entropy_length_or_count() -> None:
    keys = {"rollout_reward_max", "rollout_reward_min", "reward_std", "Ent",
            "response_length", "reward_count", "Score"}
    assert suggested_map(keys) == "--map Score=reward"
    assert suggested_map({"rollout_reward_max", "Ent", "length", "time_s"}) is None


# --- 5. verl's spread ------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["critic/score/std", "critic/rewards/std"])
def test_verl_score_std_is_the_reward_spread(tmp_path: Path, key: str) -> None:
    rows = [{"step": s, "critic/score/mean": 0.5, key: 0.0, "actor/entropy": 0.4}
            for s in range(1, 5)]
    log = load_log(write_jsonl(tmp_path / "verl.jsonl", rows))
    assert log.renames[key] == "reward_std" and log.meta["vocabulary"] == "verl"


# --- CSV: the same inference ----------------------------------------------------------------------

def test_a_csv_without_a_step_column_is_read_in_row_order(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("rollout_reward_mean,kl,split\n0.1,0.0,train\n0.2,0.01,train\n"
                    "0.3,,eval\n0.4,0.02,train\n")
    log = load_log(path)
    assert log.meta["step_from"] == "row order" and log.renames["rollout_reward_mean"] == "reward"
    assert [s for s, _ in log.rows] == [1, 2, 3]
    assert dict(log.rows)[2] == {"reward": 0.2, "kl": 0.01, "eval_reward": 0.3}


def test_a_csv_with_a_grpo_step_column(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("grpo_step,reward_mean\n1,0.1\n2,0.2\n3,0.3\n")
    log = load_log(path)
    assert log.meta["step_from"] == "grpo_step" and [s for s, _ in log.rows] == [1, 2, 3]
