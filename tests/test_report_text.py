"""A test whose report holds a lone surrogate is reported failed, and the run goes on.

Why: without tests/report_text.py, pytest-xdist's worker cannot send such a report (execnet
encodes text as UTF-8), dies, and the whole suite ends in an INTERNALERROR with no summary: a
failing hypothesis or schemathesis example did that to a clean-clone CI run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.config import ROOT
from tests.report_text import escape_surrogates

pytestmark = pytest.mark.one_backend

SURROGATE_TESTS = '''
import logging

def test_fails_with_a_surrogate():
    print("printed \\ud800 text")
    logging.getLogger("x").warning("logged \\udfff text")
    assert False, "value \\ud800"

def test_after_it():
    pass
'''


def test_a_failed_test_with_a_lone_surrogate_is_reported_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "test_surrogate.py").write_text(SURROGATE_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-p", "no:cacheprovider",
         "-p", "tests.report_text", "test_surrogate.py"],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, errors="replace",
        timeout=120)
    out = done.stdout + done.stderr
    assert "INTERNALERROR" not in out, out
    assert "1 failed, 1 passed" in out, out
    assert "value \\ud800" in out, out  # the failure's text, readable


def test_escaping_reaches_every_nested_string_and_leaves_the_rest() -> None:
    data = {"a\ud800": ["x\udfff", ("ok", 1, None)], "n": 2.5, "s": "fine"}
    assert escape_surrogates(data) == {
        "a\\ud800": ["x\\udfff", ("ok", 1, None)], "n": 2.5, "s": "fine"}
