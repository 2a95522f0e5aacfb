"""Never a traceback (issue 32): `grpodeck diagnose` answers any bytes with a report (exit 0
or 3) or a clear refusal (exit 2), whatever reader they reach; the upload route's side is
tests/app/test_fuzz_import_route.py. Inputs: arbitrary bytes, and the real and generated logs
of ``tests/importers/mutations.py`` truncated, spliced, with garbage, huge lines, deep nesting,
chat templates and braces. Bounded examples, no example database: seconds, same every run."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from typer.testing import CliRunner

from app.cli import cli
from tests.importers.mutations import ANY_BYTES, mutated, real_logs, seeds

# FUZZ_EXAMPLES raises the count for a longer hunt (600 found nothing, 2026-12-02)
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "80")), deadline=None,
                database=None, derandomize=True, suppress_health_check=list(HealthCheck))


def diagnose_bytes(content: bytes, suffix: str = ".log") -> None:
    """Run the real CLI command in-process; only a report or a clean refusal may come out."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzzed{suffix}"
        path.write_bytes(content)
        result = CliRunner().invoke(cli, ["diagnose", str(path), "--json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 2, 3), result.output
    if result.exit_code == 2:
        assert result.output.startswith("error: "), result.output


def test_the_seed_corpus_holds_the_real_logs_when_they_are_here() -> None:
    assert len(seeds()) >= 14 + len(real_logs())


@FUZZ
@given(ANY_BYTES)
@example(b"{{ '<|im_start|>assistant' }}\n" * 2)  # TypeError from literal_eval (issue 32)
@example(b"[" * 100_000)  # RecursionError from json.loads
@example(b"{'loss': 1}\n" + b"{" * 100_000 + b"\n")
def test_diagnose_answers_any_bytes(content: bytes) -> None:
    diagnose_bytes(content)


@FUZZ
@given(mutated())
def test_diagnose_answers_mutated_logs(content: bytes) -> None:
    diagnose_bytes(content)
