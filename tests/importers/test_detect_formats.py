"""Format detection: by content, never by file name, in a fixed order, with a reason that
names the file whenever nothing fits; and the small JSON formats' own rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.importers import LogFormatError, detect, json_rows, jsonl, load_log, trainer_state


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def reason(path: Path) -> str:
    with pytest.raises(LogFormatError) as err:
        load_log(path)
    assert err.value.path == str(path)
    return err.value.reason


def test_the_content_decides_not_the_name(tmp_path: Path) -> None:
    state = json.dumps({"log_history": [{"step": 1, "loss": 0.1}], "max_steps": 9,
                        "logging_steps": 3, "unrelated": 1})
    log = load_log(write(tmp_path, state, "metrics.jsonl"))
    assert log.source_format == "trainer_state"
    assert log.meta == {"max_steps": 9, "logging_steps": 3}
    rows = load_log(write(tmp_path, json.dumps([{"step": 2, "kl": 0.5}]), "trainer_state.log"))
    assert rows.source_format == "json_list" and rows.meta == {} and rows.rows == [(2, {"kl": 0.5})]
    lines = load_log(write(tmp_path, '{"step": 4, "kl": 0.5}\n', "x.json"))
    assert lines.source_format == "jsonl" and lines.meta == {}
    console = load_log(write(tmp_path, "{'loss': 0.5}\n", "y.json"))
    assert console.source_format == "console"


@pytest.mark.parametrize("content,why", [
    ("", "file is empty"),
    ("  \n\t\n", "file is empty"),
    ('{"foo": 1}', "line 1 has no 'step'"),  # one JSON object: read as a one-line JSONL
    ("[1, 2]", "JSON document is neither a trainer_state nor a list of step dicts"),
    ("[]", "JSON document is neither a trainer_state nor a list of step dicts"),
    ('"text"', "JSON document is neither a trainer_state nor a list of step dicts"),
    ("hello\n", ("unrecognised format: expected trainer_state.json, a JSON list of step dicts, "
                "JSONL, a Jupyter notebook, a W&B history CSV, a console log with printed dicts, "
                "lines of key: value / key=value pairs, or a TensorBoard event file")),
    ('{"log_history": []}', "trainer_state file holds no metric rows"),
    ('[{"step": 1}]', "json_list file holds no metric rows"),
    ('{"step": 1}\n{"step": 2}\n', "jsonl file holds no metric rows"),
    ("{'train_runtime': 1.0}\n", "no printed metrics dicts found"),
    ('[{"step": 1, "loss": 0.1}, {"loss": 0.2}]', "list item 1 has no 'step'"),
    ('{"log_history": [{"step": 1, "loss": 0.1}, {"loss": 0.2}]}',
     "log_history entry 1 has no 'step'"),
])
def test_clear_reasons(tmp_path: Path, content: str, why: str) -> None:
    assert reason(write(tmp_path, content)) == why


def test_unreadable_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert reason(tmp_path / "missing.log") == "file not found"
    assert reason(tmp_path) == ("folder holds no trainer_state.json, TensorBoard events, "
                                "MLflow mlruns/ store or W&B run")
    binary = tmp_path / "b.log"
    binary.write_bytes(b"{'loss': 1.0}\n\x00")
    assert reason(binary) == "binary file, not a text log"
    late_nul = tmp_path / "late.log"
    late_nul.write_bytes(b"{'loss': 1.0}\n" + b" " * 5000 + b"\x00")
    assert load_log(late_nul).rows == [(1, {"loss": 1.0})]  # only the head is sniffed
    monkeypatch.setattr(detect, "MAX_BYTES", 10)
    big = write(tmp_path, "{'loss': 1.0}\n", "big.log")
    assert reason(big) == "file is larger than 10 bytes"
    assert load_log(write(tmp_path, "{'loss':1}", "ok.log")).rows == [(1, {"loss": 1.0})]  # 10


def test_unreadable_permissions(tmp_path: Path) -> None:
    locked = write(tmp_path, "{'loss': 1.0}\n", "locked.log")
    locked.chmod(0)
    try:
        try:
            locked.read_bytes()
        except PermissionError:
            assert reason(locked).startswith("cannot read file: Permission denied")
        else:  # root reads anything: nothing to check here
            assert load_log(locked).rows
    finally:
        locked.chmod(0o600)


def test_bad_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    p = tmp_path / "latin.log"
    p.write_bytes(b'{"step": 1, "loss": 0.5, "note": "caf\xe9"}\n')
    assert load_log(p).rows == [(1, {"loss": 0.5})]


def test_console_logging_steps_are_passed_through(tmp_path: Path) -> None:
    p = write(tmp_path, "{'loss': 1.0}\n{'loss': 2.0}\n")
    assert [s for s, _ in load_log(p, logging_steps=5).rows] == [5, 10]


def test_json_rows_looks_like() -> None:
    assert json_rows.looks_like([{"step": 1}])
    assert not json_rows.looks_like([])
    assert not json_rows.looks_like([{"step": 1}, 2])
    assert not json_rows.looks_like({"step": 1})
    assert not json_rows.looks_like("[{}]")


def test_trainer_state_looks_like() -> None:
    assert trainer_state.looks_like({"log_history": []})
    assert not trainer_state.looks_like({"log_history": {}})
    assert not trainer_state.looks_like([{"log_history": []}])


def test_jsonl_looks_like_reads_the_first_non_blank_line() -> None:
    assert jsonl.looks_like('\n\n{"step": 1}\nnot json')
    assert not jsonl.looks_like('[1]\n{"step": 1}')
    assert not jsonl.looks_like("not json\n{}")
    assert not jsonl.looks_like("\n  \n")


def test_jsonl_tolerates_only_a_torn_last_line(tmp_path: Path) -> None:
    torn = jsonl.parse('{"step": 1, "kl": 0.1}\n\n{"step": 2, "kl', "f.jsonl")
    assert torn.rows == [(1, {"kl": 0.1})] and torn.source_format == "jsonl" and torn.meta == {}
    with pytest.raises(LogFormatError) as err:
        jsonl.parse('{"step": 1, "kl": 0.1}\n{"step": 2, "kl\n{"step": 3}\n', "f.jsonl")
    assert err.value.path == "f.jsonl"
    assert err.value.reason.startswith("line 2 is not JSON: ")
    with pytest.raises(LogFormatError) as only:  # a single line that is torn is not a log
        jsonl.parse('{"step": 2, "kl', "g.jsonl")
    assert only.value.reason.startswith("line 1 is not JSON") and only.value.path == "g.jsonl"
    with pytest.raises(LogFormatError, match="line 3 has no 'step'"):
        jsonl.parse('{"step": 1}\n\n{"kl": 1}\n', "f.jsonl")


def test_other_os_errors_are_named(tmp_path: Path) -> None:
    parent = write(tmp_path, "{'loss': 1.0}\n", "file.log")
    inside = parent / "child.log"  # a path through a file: "Not a directory"
    assert reason(inside) == "cannot read file: Not a directory"


def test_only_the_first_4096_bytes_are_sniffed_for_nul(tmp_path: Path) -> None:
    edge = tmp_path / "edge.log"
    head = b"{'loss': 1.0}\n"
    edge.write_bytes(head + b" " * (4096 - len(head)) + b"\x00")
    assert load_log(edge).rows == [(1, {"loss": 1.0})]
    edge.write_bytes(head + b" " * (4095 - len(head)) + b"\x00")
    assert reason(edge) == "binary file, not a text log"
