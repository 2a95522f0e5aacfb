"""Issue 32: every log people actually keep is read, each to the verdict its numbers give.

Each format is written the way its own tool writes it (nbformat for the notebook with TRL's
notebook table and its real column names, torch's ``SummaryWriter`` for TensorBoard, MLflow's
own client for ``mlruns/``, W&B's panel-export columns for the CSV), from one of two synthetic
runs: a healthy one (reward climbs and levels, spread kept) and a collapsing one (reward rises,
then falls to ~0.08 and stays there).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from app.importers import LogFormatError, load_log
from app.imports.service import diagnose_path

Row = tuple[int, dict[str, float]]
STEPS = 120


def healthy(n: int = STEPS, seed: int = 1) -> list[Row]:
    rng = np.random.default_rng(seed)
    return [(s, {"reward": 0.2 + 0.5 * (1 - np.exp(-s / 40)) + rng.normal(0, 0.02),
                 "reward_std": 0.25 + rng.normal(0, 0.01),
                 "kl": 0.002 + 0.0001 * s + abs(rng.normal(0, 0.0005)),
                 "entropy": 0.6 + rng.normal(0, 0.01),
                 "completions/mean_length": 120 + rng.normal(0, 3),
                 "loss": rng.normal(0, 0.01)}) for s in range(1, n + 1)]


def collapsing(n: int = STEPS, seed: int = 2) -> list[Row]:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(1, n + 1):
        reward = 0.2 + 0.4 * s / 60 if s <= 60 else max(0.08, 0.6 - 0.52 * (s - 60) / 15)
        out.append((s, {"reward": reward + rng.normal(0, 0.02),
                        "reward_std": 0.25 + rng.normal(0, 0.01),
                        "kl": 0.002 + abs(rng.normal(0, 0.0005)),
                        "entropy": 0.6 + rng.normal(0, 0.01),
                        "completions/mean_length": 120 + rng.normal(0, 3),
                        "loss": rng.normal(0, 0.01)}))
    return out


RUNS: dict[str, Callable[[], list[Row]]] = {"healthy": healthy, "collapsing": collapsing}


def expect(path: Path, run: str) -> None:
    """``healthy`` -> verdict healthy; ``collapsing`` -> a reward_collapse finding."""
    d = diagnose_path(path)
    if run == "healthy":
        assert d.verdict == "healthy", [(f.category, f.summary) for f in d.findings]
    else:
        assert "reward_collapse" in {f.category for f in d.findings}, d.verdict
    assert {"reward", "kl", "entropy"} <= set(d.metrics)


# --- Jupyter notebook: TRL's notebook table ---------------------------------------------------

TABLE_COLUMNS = {  # header as transformers' notebook callback writes it -> our name
    "Training Loss": "loss", "reward": "reward", "reward_std": "reward_std", "kl": "kl",
    "entropy": "entropy", "completions / mean_length": "completions/mean_length",
    "rewards / format_reward / mean": "reward",
}


def trl_table_html(rows: list[Row]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ["Step", *TABLE_COLUMNS])
    body = "".join(
        "<tr><td>{}</td>{}</tr>".format(step, "".join(
            f"<td>{m[name]:.6f}</td>" if not (step == 1 and name == "loss") else "<td>No log</td>"
            for name in TABLE_COLUMNS.values())) for step, m in rows)
    return ("<div><progress value='120' max='120'></progress> [120/120 05:00, Epoch 1/1]</div>"
            f'<table border="1" class="dataframe">\n  <thead>\n <tr style="text-align: left;">'
            f"{head}</tr>\n  </thead>\n  <tbody>\n{body}</tbody>\n</table><p>")


def write_notebook(path: Path, rows: list[Row]) -> Path:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    nb = new_notebook(cells=[
        new_code_cell("!pip install trl", outputs=[
            new_output("stream", name="stdout", text="Successfully installed trl\n")]),
        new_code_cell("trainer.train()", outputs=[
            new_output("display_data", data={"text/html": trl_table_html(rows),
                                             "text/plain": "<IPython.core.display.HTML object>"}),
            new_output("execute_result", execution_count=2, data={
                "text/plain": "TrainOutput(global_step=120, training_loss=0.01)"})]),
    ])
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("run", ["healthy", "collapsing"])
def test_a_notebook_with_trls_table_is_read(tmp_path: Path, run: str) -> None:
    path = write_notebook(tmp_path / "grpo.ipynb", RUNS[run]())
    log = load_log(path)
    assert log.source_format == "notebook (table)"
    assert [s for s, _ in log.rows] == list(range(1, STEPS + 1))
    assert log.renames["Training Loss"] == "loss"
    assert log.renames["completions / mean_length"] == "completions/mean_length"
    assert log.renames["rewards / format_reward / mean"] == "rewards/format_reward/mean"
    assert "loss" not in log.rows[0][1] and "loss" in log.rows[1][1]  # "No log" left out
    expect(path, run)


def test_a_notebook_of_printed_dicts_is_read(tmp_path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    printed = "".join(f"{{'loss': {m['loss']}, 'reward': {m['reward']}, 'kl': {m['kl']}, "
                      f"'entropy': {m['entropy']}, 'step': {s}}}\n" for s, m in collapsing())
    nb = new_notebook(cells=[new_code_cell("trainer.train()", outputs=[
        new_output("stream", name="stdout", text=printed)])])
    nbformat.write(nb, tmp_path / "dicts.ipynb")
    assert load_log(tmp_path / "dicts.ipynb").source_format == "notebook (console)"
    expect(tmp_path / "dicts.ipynb", "collapsing")


def test_a_notebook_with_a_printed_dataframe_is_read(tmp_path: Path) -> None:
    """A ``text/plain`` table: the log as a pandas DataFrame, displayed (index column first)."""
    import nbformat
    import pandas as pd
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    frame = pd.DataFrame([{"Step": s, "Training Loss": m["loss"], "reward": m["reward"],
                           "kl": m["kl"], "entropy": m["entropy"]} for s, m in collapsing()])
    nb = new_notebook(cells=[new_code_cell("pd.DataFrame(trainer.state.log_history)", outputs=[
        new_output("execute_result", execution_count=1,
                   data={"text/plain": frame.to_string(max_rows=None)})])])
    nbformat.write(nb, tmp_path / "frame.ipynb")
    log = load_log(tmp_path / "frame.ipynb")
    assert log.source_format == "notebook (table)" and len(log.rows) == STEPS
    assert set(log.rows[0][1]) == {"loss", "reward", "kl", "entropy"}
    expect(tmp_path / "frame.ipynb", "collapsing")


def test_a_notebook_without_metrics_is_refused_with_its_reason(tmp_path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nbformat.write(new_notebook(cells=[new_code_cell("print(1)")]), tmp_path / "empty.ipynb")
    with pytest.raises(LogFormatError, match="notebook outputs hold no training table"):
        load_log(tmp_path / "empty.ipynb")


# --- TensorBoard: events written by a real writer --------------------------------------------

def write_tensorboard(folder: Path, rows: list[Row], prefix: str = "train/") -> Path:
    """TRL's ``report_to="tensorboard"``: transformers' callback writes through torch's
    SummaryWriter, tags ``train/<key>``."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, metrics in rows:
        for key, value in metrics.items():
            writer.add_scalar(prefix + key, value, step)
    writer.close()
    return folder


@pytest.mark.parametrize("run", ["healthy", "collapsing"])
def test_a_tensorboard_event_folder_is_read(tmp_path: Path, run: str) -> None:
    folder = write_tensorboard(tmp_path / "runs" / "Dec02_host", RUNS[run]())
    log = load_log(tmp_path / "runs")  # the folder above the run's: found by walking it
    assert log.source_format == "tensorboard"
    assert [s for s, _ in log.rows] == list(range(1, STEPS + 1))
    assert log.renames["train/reward"] == "reward"
    expect(tmp_path / "runs", run)
    [event_file] = folder.glob("events.out.tfevents.*")
    renamed = tmp_path / "upload.log"  # an upload is kept under a name of our own
    renamed.write_bytes(event_file.read_bytes())
    assert len(load_log(renamed).rows) == STEPS


def test_a_tensorboard_folder_of_two_runs_is_refused_naming_them(tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "a", healthy(5))
    write_tensorboard(tmp_path / "b", healthy(5))
    with pytest.raises(LogFormatError, match=r"events of 2 runs \(a, b\)"):
        load_log(tmp_path)


# --- W&B: the history CSV from the UI; offline run files ---------------------------------------

def write_wandb_csv(path: Path, rows: list[Row], run: str = "grpo-qwen") -> Path:
    """A W&B panel's "Export as CSV": ``Step``, ``<run> - train/<key>`` with its
    ``__MIN``/``__MAX`` band columns."""
    keys = list(rows[0][1])
    cols = [f"{run} - train/{k}{band}" for k in keys for band in ("", "__MIN", "__MAX")]
    lines = [",".join(['"Step"', *(f'"{c}"' for c in cols)])]
    for step, m in rows:
        lines.append(",".join([str(step), *(f"{m[k]}" for k in keys for _ in range(3))]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("run", ["healthy", "collapsing"])
def test_a_wandb_history_csv_is_read(tmp_path: Path, run: str) -> None:
    path = write_wandb_csv(tmp_path / "wandb_export.csv", RUNS[run]())
    log = load_log(path)
    assert log.source_format == "wandb_csv" and len(log.rows) == STEPS
    assert log.renames["grpo-qwen - train/reward"] == "reward"
    assert not any(k.endswith(("__MIN", "__MAX")) for _, m in log.rows for k in m)
    expect(path, run)


def test_a_wandb_history_csv_from_the_api_is_read(tmp_path: Path) -> None:
    rows = collapsing()
    keys = list(rows[0][1])
    text = "_step,_runtime,_timestamp," + ",".join(f"train/{k}" for k in keys) + "\n" + "".join(
        f"{s},{s * 2.0},{1.7e9 + s}," + ",".join(str(m[k]) for k in keys) + "\n"
        for s, m in rows)
    (tmp_path / "history.csv").write_text(text)
    assert set(load_log(tmp_path / "history.csv").rows[0][1]) == set(keys)
    expect(tmp_path / "history.csv", "collapsing")


def test_a_wandb_offline_run_file_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    run = tmp_path / "wandb" / "offline-run-20261202_093125-x5uc8enf"
    run.mkdir(parents=True)
    (run / "run-x5uc8enf.wandb").write_bytes(b":W&B\xe1\xbe\x00\x3a\xfd\xea\xd1M\x00\x01\x08\x01")
    for target in (run / "run-x5uc8enf.wandb", tmp_path):
        with pytest.raises(LogFormatError, match=r"wandb sync .* history as CSV"):
            load_log(target)


# --- MLflow's file store ------------------------------------------------------------------------

@pytest.mark.parametrize("run", ["healthy", "collapsing"])
def test_an_mlruns_folder_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  run: str) -> None:
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it, deprecated
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(name, raising=False)  # another test's experiment is not in this store
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    with mlflow.start_run(run_name="grpo"):
        mlflow.log_param("model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct")
        for step, metrics in RUNS[run]():
            mlflow.log_metrics(metrics, step=step)
    log = load_log(tmp_path / "mlruns")
    assert log.source_format == "mlflow_file_store" and len(log.rows) == STEPS
    assert log.meta["mlflow_run"] == "grpo"
    assert log.meta["model_name_or_path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "completions/mean_length" in log.rows[0][1]  # a nested metric file
    expect(tmp_path / "mlruns", run)


# --- OpenRLHF's printed dicts -------------------------------------------------------------------

def openrlhf_printed(rows: list[Row]) -> str:
    names = {"reward": "train/reward", "kl": "train/kl", "entropy": "train/policy_entropy",
             "completions/mean_length": "train/response_length", "loss": "train/policy_loss"}
    lines = ["[2026-12-02 09:00:00] Loading model ..."]
    for step, m in rows:
        status = {"train/global_step": step, **{names[k]: m[k] for k in names},
                  "train/return": m["reward"] - 0.01, "train/actor_lr": 1e-6}
        lines.append(f"Episode [1/1]: {step}/{STEPS} {status}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("run", ["healthy", "collapsing"])
def test_openrlhf_printed_dicts_are_read(tmp_path: Path, run: str) -> None:
    path = tmp_path / "openrlhf.log"
    path.write_text(openrlhf_printed(RUNS[run]()))
    log = load_log(path)
    assert log.source_format == "console" and log.meta["vocabulary"] == "openrlhf"
    assert [s for s, _ in log.rows] == list(range(1, STEPS + 1))
    assert log.renames["train/reward"] == "reward"
    assert log.renames["train/policy_entropy"] == "entropy"
    expect(path, run)


# --- Hand-written loops ---------------------------------------------------------------------------

def loop_log(rows: list[Row], group: Callable[[float], list[float]]) -> str:
    lines = ["Loading Qwen2.5-0.5B-Instruct", "Config: lr=1e-6, group=4"]
    for step, m in rows:
        lines.append(f"GRPO step {step}/{STEPS} | loss: {m['loss']:.4f} | mean_reward: "
                     f"{m['reward']:.4f} | KL: {m['kl']:.5f} | Entropy: {m['entropy']:.3f} | "
                     f"resp_len: {m['completions/mean_length']:.1f}")
        lines.append(f"  Rewards: {[round(r, 3) for r in group(m['reward'])]}")
    return "\n".join(lines) + "\n"


def test_a_hand_written_loop_with_rewards_lists_is_read(tmp_path: Path) -> None:
    path = tmp_path / "loop.log"
    path.write_text(loop_log(collapsing(), lambda r: [r - 0.2, r + 0.2, r - 0.1, r + 0.1]))
    log = load_log(path)
    assert log.source_format == "key_value" and log.meta["vocabulary"] == "loop"
    assert [s for s, _ in log.rows] == list(range(1, STEPS + 1))
    assert log.renames == {"mean_reward": "reward", "KL": "kl", "Entropy": "entropy",
                           "resp_len": "completions/mean_length", "Rewards_std": "reward_std"}
    first = log.rows[0][1]
    assert first["Rewards"] == pytest.approx(first["reward"], abs=1e-3)  # the list's mean
    assert first["reward_std"] == pytest.approx(np.std([-0.2, 0.2, -0.1, 0.1], ddof=1), abs=1e-3)
    expect(path, "collapsing")


def test_a_loop_whose_groups_all_score_the_same_has_zero_spread(tmp_path: Path) -> None:
    path = tmp_path / "loop.log"
    path.write_text(loop_log(healthy(), lambda r: [1.0, 1.0, 1.0, 1.0]))
    log = load_log(path)
    assert {m["reward_std"] for _, m in log.rows} == {0.0}
    assert "zero_reward_spread" in {f.category for f in diagnose_path(path).findings}


# --- never a traceback ----------------------------------------------------------------------------

# the line that made literal_eval raise TypeError (a set of a set), and a whole template
ECHO = "{{ '<|im_start|>assistant' }}"
TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}" + ECHO


def test_a_console_log_that_prints_its_chat_template_is_read(tmp_path: Path) -> None:
    rows = "".join(f"{{'loss': {m['loss']}, 'reward': {m['reward']}, 'kl': {m['kl']}, "
                   f"'entropy': {m['entropy']}, 'step': {s}}}\n" for s, m in collapsing())
    path = tmp_path / "train.log"
    path.write_text(f"chat_template: {TEMPLATE}\n{ECHO}\n{rows}{TEMPLATE}\n{ECHO}\n")
    assert len(load_log(path).rows) == STEPS
    expect(path, "collapsing")
    only = tmp_path / "template.log"
    only.write_text(f"{TEMPLATE}\n{ECHO}\n" * 3)
    with pytest.raises(LogFormatError, match="unrecognised format"):
        load_log(only)


def test_a_100k_deep_json_is_refused_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LogFormatError, match="nested deeper than 200 levels"):
        load_log(path)
    path.write_text('{"log_history": ' + "[" * 300 + "]" * 300 + "}")  # parses, still refused
    with pytest.raises(LogFormatError, match="nested deeper"):
        load_log(path)
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"step": 1, "reward": 0.1}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(LogFormatError, match="nested deeper"):
        load_log(lines)


def test_the_cli_answers_with_exit_2_for_deep_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    (tmp_path / "deep.json").write_text("{" * 100_000)
    (tmp_path / "deeper.json").write_text("[" * 100_000 + "]" * 100_000)
    for name in ("deep.json", "deeper.json"):
        done = CliRunner().invoke(cli, ["diagnose", str(tmp_path / name)])
        assert done.exit_code == 2, (name, done.output, done.exception)
        assert done.exception is None or isinstance(done.exception, SystemExit)


def test_json_body_of_a_notebook_is_not_mistaken(tmp_path: Path) -> None:
    """A JSON object that merely has ``cells`` (no nbformat version) is not a notebook."""
    (tmp_path / "x.json").write_text(json.dumps({"cells": []}))
    with pytest.raises(LogFormatError):
        load_log(tmp_path / "x.json")


def test_a_printed_config_dict_is_not_a_training_row(tmp_path: Path) -> None:
    """The loop spellings widen what marks a metrics dict, but not to a config's ``lr``: a
    config printed first would shift every row of a step-less log by one."""
    rows = "".join(f"{{'loss': {m['loss']}, 'reward': {m['reward']}}}\n" for _, m in healthy(10))
    path = tmp_path / "train.log"
    path.write_text("{'lr': 1e-06, 'batch_size': 8, 'LR': 0.1}\n" + rows)
    assert [s for s, _ in load_log(path).rows] == list(range(1, 11))
