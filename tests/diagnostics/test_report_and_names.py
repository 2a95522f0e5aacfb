"""Renderings, the data model, canonical names and the rank statistics."""

from __future__ import annotations

import json
import math

import numpy as np

from app.diagnostics import Diagnosis, Finding, diagnose
from app.diagnostics.report import format_text, to_json_dict
from app.diagnostics.stats import rho_crit, spearman
from app.metrics.names import canonical_name, normalize_row


def test_report_text_and_json(b):
    steps, c = b.healthy_cols(200, 1)
    c["completions/clipped_ratio"] = np.full(len(steps), 0.97)
    d = diagnose(b.rows_from(steps, **c))
    text = format_text(d)
    assert text.splitlines()[0].startswith("Verdict: CRITICAL")
    assert "truncation" in text and "evidence:" in text and "    - " in text
    j = to_json_dict(d)
    assert j["verdict"] == "critical"
    assert set(j["findings"][0]) == {"category", "severity", "first_step", "last_step",
                                     "summary", "evidence", "actions", "metric"}
    json.dumps(j, allow_nan=False)


def test_verdict_ignores_info():
    f = Finding("dead_reward_component", "info", 1, 10, "x")
    assert Diagnosis.from_findings([f]).verdict == "healthy"
    w = Finding("stalled", "warning", 1, 10, "y")
    c = Finding("numerical_instability", "critical", 5, 5, "z", evidence={"v": math.nan})
    d = Diagnosis.from_findings([f, w, c])
    assert d.verdict == "critical" and d.findings[0].severity == "critical"
    assert d.to_dict()["findings"][0]["evidence"]["v"] == "nan"
    assert Finding.from_dict(w.to_dict()) == w


def test_canonical_names():
    assert canonical_name("completion_length") == "completions/mean_length"
    assert canonical_name("clipped_ratio") == "completions/clipped_ratio"
    assert canonical_name("rewards/acc") == "rewards/acc/mean"
    assert canonical_name("rewards/acc/std") == "rewards/acc/std"
    assert canonical_name("rewards/acc/mean") == "rewards/acc/mean"
    assert canonical_name("eval_reward") == "eval_reward"
    assert canonical_name("eval_rewards/acc") == "eval_rewards/acc/mean"
    assert canonical_name("eval_completion_length") == "eval_completions/mean_length"
    assert canonical_name("kl") == "kl"


def test_normalize_row_values_and_preference():
    row = normalize_row({"completions/mean_length": 1000.0, "completion_length": 1400,
                         "loss": "0.5", "kl": "nan", "grad_norm": "inf", "note": "hello",
                         "flag": True, "none": None})
    assert row["completions/mean_length"] == 1000.0 and row["loss"] == 0.5
    assert math.isnan(row["kl"]) and row["grad_norm"] == math.inf
    assert "note" not in row and "flag" not in row and "none" not in row
    # order does not matter: the new spelling wins either way
    assert normalize_row({"completion_length": 1400, "completions/mean_length": 1000.0})[
        "completions/mean_length"] == 1000.0


def test_spearman():
    x = np.arange(20.0)
    assert spearman(x, x) > 0.99 and spearman(x, -x) < -0.99
    assert spearman(x, np.ones(20)) == 0.0 and spearman(x[:2], x[:2]) == 0.0
    assert 0.3 < rho_crit(20) < 0.4
