"""Two reader bugs that, planted by hand, passed the whole suite (issue 54):

- a notebook reader that takes the FIRST TRL progress table instead of the last: a notebook
  often holds an aborted ``trainer.train()`` and then the full run, and the run is the last;
- a W&B history CSV reader that reads an empty cell as 0.0: W&B leaves a cell empty on the
  steps a metric was not logged (an eval score every N steps), and a 0.0 there would be a
  collapse that never happened.
"""

from __future__ import annotations

from pathlib import Path

from app.importers import load_log
from tests.importers.test_readers import healthy, trl_table_html

ABORTED_STEPS = 3


def write_two_runs_notebook(path: Path) -> Path:
    """An aborted first ``trainer.train()`` (3 steps, reward 0.9), then the full run."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    aborted = [(s, {**m, "reward": 0.9}) for s, m in healthy(ABORTED_STEPS)]
    cells = [new_code_cell("trainer.train()", outputs=[
        new_output("display_data", data={"text/html": html})]) for html in
        (trl_table_html(aborted), trl_table_html(healthy()))]
    nb = new_notebook(cells=cells)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return path


def test_a_notebook_with_two_trl_tables_is_read_from_the_last(tmp_path: Path) -> None:
    log = load_log(write_two_runs_notebook(tmp_path / "two_runs.ipynb"))
    full = healthy()
    assert log.source_format == "notebook (table)" and len(log.rows) == len(full)
    assert [round(m["reward"], 6) for _, m in log.rows[:ABORTED_STEPS]] == [
        round(m["reward"], 6) for _, m in full[:ABORTED_STEPS]]


def test_empty_csv_cells_are_no_value_not_zero(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    path.write_text("_step,train/reward,eval/reward,train/kl\n"
                    "1,0.2,,0.01\n2,0.3,,\n3,0.4,0.35,0.02\n4,,,0.03\n")
    rows = dict(load_log(path).rows)
    assert rows[1] == {"reward": 0.2, "kl": 0.01}
    assert rows[2] == {"reward": 0.3}
    assert rows[3] == {"reward": 0.4, "eval_reward": 0.35, "kl": 0.02}
    assert rows[4] == {"kl": 0.03}
