"""Issue 55: five secret shapes reached other users in clear, in a run's shipped log and in its
``error``: an ``Authorization`` header of any scheme (``Basic``, GitHub's ``token``), a command
line's ``--password x`` / ``--password=x``, a netrc entry, and another run's bare token (random
``secrets.token_urlsafe(32)``, so only its shape can find it). Each is redacted, in the log view
and the download as in the run page and the API; ordinary text of similar shape stays."""

from __future__ import annotations

import secrets

import pytest
from fastapi.testclient import TestClient

from app.core.redact import REDACTED, redact

OTHER_RUN_TOKEN = secrets.token_urlsafe(32)  # made as app.runs.service makes run tokens
SHAPES = {
    "basic_auth": ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    "basic_auth_in_headers_dict": ("{'Authorization': 'Basic Ym9iOmh1bnRlcjI='}",
                                   "Ym9iOmh1bnRlcjI="),
    "github_token_scheme": ("Authorization: token ghp_ShortOrOldToken123",
                            "ghp_ShortOrOldToken123"),
    "github_old_hex_token": ("-H 'Authorization: token 0123456789abcdef0123456789abcdef01234567'",
                             "0123456789abcdef0123456789abcdef01234567"),
    "github_fine_grained_pat": ("push with github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
                                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv"),
    "password_flag": ("$ python train.py --password hunter2x --steps 3", "hunter2x"),
    "password_flag_short": ("$ python train.py --password x --steps 3", "--password x "),
    "password_flag_equals": ("$ python train.py --password=x --steps 3", "--password=x "),
    "hf_token_flag": ("argv: ['--hf-token', 'abcdef0123'] run --hf-token abcdef0123", "abcdef0123"),
    "netrc_one_line": ("machine api.wandb.ai login user password KEY0123456789", "KEY0123456789"),
    "netrc_lines": ("machine h\n  login u\n  password s3cretKEY\n", "s3cretKEY"),
    "other_runs_token": (f"POST /api/runs/7/logs with {OTHER_RUN_TOKEN}.", OTHER_RUN_TOKEN),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_redacted(name: str) -> None:
    text, secret = SHAPES[name]
    cleaned = redact(text)
    assert secret not in cleaned and REDACTED in cleaned, cleaned


def test_text_of_similar_shape_stays() -> None:
    text = ("Authorization required: log in\n--max-new-tokens 128 --pad-token <pad> --steps 3\n"
            "the password was wrong\nmachine learning\n"
            "sha1 0123456789abcdef0123456789abcdef01234567 "
            "snake_case_identifier_that_is_43_chars_long "
            "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n")
    assert redact(text) == text


def _report(client: TestClient, run_id: int, headers: dict[str, str], text: str) -> None:
    chunk = {"stream": "stdout", "offset": 0, "text": text}
    reply = client.post(f"/api/runs/{run_id}/logs", json={"chunks": [chunk]}, headers=headers)
    assert reply.status_code == 200, reply.text
    reply = client.post(f"/api/runs/{run_id}/finished", headers=headers,
                        json={"returncode": 1, "error": "failed: " + text,
                              "traceback_tail": "Traceback:\n" + text})
    assert reply.status_code == 200, reply.text


def test_the_log_view_and_the_error_show_none_of_them(
        client: TestClient, running: tuple[int, dict[str, str]]) -> None:
    run_id, headers = running
    _report(client, run_id, headers, "".join(text + "\n" for text, _ in SHAPES.values()))
    pages = {"logs.txt": client.get(f"/runs/{run_id}/logs.txt").text,
             "logs": client.get(f"/runs/{run_id}/logs").text,
             "run": client.get(f"/runs/{run_id}").text,
             "api": client.get(f"/api/runs/{run_id}").json()}
    assert "failed: " in pages["api"]["error"] and "Traceback" in pages["api"]["traceback_tail"]
    pages["api"] = pages["api"]["error"] + pages["api"]["traceback_tail"]
    for where, text in pages.items():
        for name, (_, secret) in SHAPES.items():
            assert secret not in text, (where, name)
        assert "--steps 3" in text and "machine api.wandb.ai" in text, where
