"""Each kind of secret a training script may print is redacted, each terminal sequence is
stripped, and ordinary log text (metrics, tokenizer settings, paths) stays as printed."""

from __future__ import annotations

import time

import pytest

from app.core.redact import REDACTED, redact, strip_terminal

PEM_IN_JSON = ('"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n'
               '-----END PRIVATE KEY-----\\n"')
SECRETS = {
    "deck_key": ("key gd_AbCdEfGhIjKlMnOpQrStUvWx_yz0123456789abcd end",
                 "gd_AbCdEfGhIjKlMnOpQrStUvWx_yz0123456789abcd"),
    "hf_token": ("hub hf_abcdefghijklmnopqrstuvwxyzABCDEF end", "hf_abcdefghijklmnopqrstuvwxyzABCDEF"),
    "aws_key_id": ("id AKIAIOSFODNN7EXAMPLE end", "AKIAIOSFODNN7EXAMPLE"),
    "aws_secret": ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                   "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "gcp_api_key": ("k AIzaSyA-1234567890abcdefghijklmnopqrstu end",
                    "AIzaSyA-1234567890abcdefghijklmnopqrstu"),
    "gcp_oauth": ("t ya29.a0AfH6SMBabcdefghijklmnopqrstuv end", "ya29.a0AfH6SMBabcdefghijklmnopqrstuv"),
    "gcp_private_key": (PEM_IN_JSON, "MIIEvQIBADANBg"),
    "openai": ("OPENAI sk-proj-abcdefghijklmnopqrstuvwxyz0123 end",
               "sk-proj-abcdefghijklmnopqrstuvwxyz0123"),
    "anthropic": ("x sk-ant-api03-abcdefghijklmnopqrstuvwxyz end",
                  "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"),
    "wandb_env": ("WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
                  "0123456789abcdef0123456789abcdef01234567"),
    "wandb_login": ("$ wandb login 0123456789abcdef0123456789abcdef01234567",
                    "0123456789abcdef0123456789abcdef01234567"),
    "password": ("connect(password=hunter22, user=bob)", "hunter22"),
    "token_colon": ("token: abc123xyz", "abc123xyz"),
    "secret_json": ('{"client_secret": "s3cr3t!value"}', "s3cr3t!value"),
    "url_credentials": ("postgres://bob:pa55word@db:5432/x", "pa55word"),
    "bearer": ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
    "query_token": ("GET https://h/x?token=qwertyuiop&x=1", "qwertyuiop"),
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_kind_of_secret_is_redacted(name: str) -> None:
    text, secret = SECRETS[name]
    cleaned = redact(text)
    assert secret not in cleaned and REDACTED in cleaned, cleaned


def test_an_exact_secret_is_redacted_wherever_it_appears() -> None:
    token = "Zx9_randomRunToken-0123456789abcdefghijKLMN"
    assert redact(f"run token {token}.", [token]) == f"run token {REDACTED}."


def test_ordinary_log_text_is_kept() -> None:
    text = ("step=3 loss=0.125 max_new_tokens=128 tokens/s=5.2 pad_token=<|endoftext|> "
            "author=bob https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct "
            "/home/u/ckpt sha256 0123456789abcdef0123456789abcdef01234567\n\tnext line\r\n")
    assert redact(text) == text


@pytest.mark.parametrize(("raw", "plain"), [
    ("\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\\n", "click me\n"),  # OSC 8
    ("\x1b]0;owned title\x07after\n", "after\n"),  # window title
    ("\x1b[2J\x1b[3J\x1b[Hclean\n", "clean\n"),  # clear screen, home
    ("\x1b[31;1mred\x1b[0m \x1b[?25l\x9b2Jx\x1bc\n", "red x\n"),  # colours, cursor, C1, reset
    ("a\x00b\x07c\x08d\te\r\n", "abcd\te\r\n"),  # lone controls; tab, CR, LF stay
])
def test_terminal_sequences_are_stripped_and_text_and_newlines_kept(raw: str, plain: str) -> None:
    assert strip_terminal(raw) == plain
    assert redact(raw) == plain


def test_a_dry_runs_error_is_redacted_before_it_is_stored() -> None:
    """A reward's traceback is the dry-run page's answer: its secrets go before it is kept."""
    from app.dryruns.models import DryRun
    from app.dryruns.service import finish

    dry = DryRun()
    text, secret = SECRETS["hf_token"]
    finish(dry, {"error": f"Traceback ...\nValueError: {text}\x1b]0;title\x07"})
    assert dry.status == "failed" and dry.error is not None and REDACTED in dry.error
    for stored in (dry.error, dry.result["error"]):
        assert secret not in stored and "\x1b" not in stored


@pytest.mark.parametrize("text", ["x" * 1_000_000, "password" * 120_000, "http:" * 200_000,
                                  "-----BEGIN PRIVATE KEY-----" * 30_000, "a-" * 500_000])
def test_a_megabyte_without_spaces_is_scrubbed_in_linear_time(text: str) -> None:
    """A log line is the user's text: an unbounded pattern took minutes on 1 MB (quadratic)."""
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 10.0  # about 0.3 s here, under load
