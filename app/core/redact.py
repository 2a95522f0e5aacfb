r"""Scrub text that users' code printed before the server stores it: secrets out, terminal
control sequences out.

Why here and before storing: a run's shipped log, its error and traceback are shown to every
user who can read the run (the Logs tab, ``logs.txt``, the run page), and a training script
prints whatever it has: an API key in a config dump, ``password=`` in a connection string,
an ``hf_`` token in a traceback's locals. Scrubbing once, on the way in, means no reader (page,
download, JSON API, backup) ever sees them. Terminal sequences (OSC 8 hyperlinks, window titles,
clear screen, cursor moves) are removed so a downloaded ``logs.txt`` cannot take over the
terminal it is printed in; plain text, tabs, newlines and carriage returns stay.

Every pattern is anchored at a word start and bounded in length, so a megabyte without spaces
costs linear time (an unbounded ``[\w.-]*?password`` was quadratic: a 1 MB word took minutes).
The patterns are deliberately specific (a prefix or a ``name=value`` shape); the run's own
token is redacted by its exact value (``extra``), which the report API knows from the request
that carries it. Issue 55 added the shapes that still reached other users: an
``Authorization`` header of any scheme (``Basic``, GitHub's ``token``), a command line's
``--password x``, a netrc entry, and the bare token of *another* run (which only its shape can
find: ``secrets.token_urlsafe(32)``, 43 URL-safe characters mixing cases and a digit or ``-_``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"

# ESC ] ... (BEL | ESC \): OSC (hyperlinks, titles); ESC [ ... final: CSI (colours, clear
# screen, cursor); ESC P/X/^/_ ... ESC \: DCS/SOS/PM/APC strings; ESC + one byte: the rest.
# Then the lone C0/C1 controls except \t \n \r.
_TERMINAL = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]?|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)

# Tokens recognisable by their shape alone.
_KEYS = re.compile(
    r"\bgd_[A-Za-z0-9_\-]{16,}"  # GRPO Deck API keys
    r"|\bhf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bya29\.[0-9A-Za-z_\-]{20,}"  # Google OAuth access tokens
    r"|\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic
    r"|\bwandb_v1_[A-Za-z0-9_\-]{20,}"  # W&B (new format)
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"  # GitHub fine-grained
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]{0,20}PRIVATE KEY-----")

# ``name=value`` / ``name: value`` / ``"name": "value"`` where the name ends with a word that
# says it is a secret (``password``, ``hf_token``, ``WANDB_API_KEY``, ``aws_secret_access_key``);
# the name stays. Found by that word (a cheap scan), the name's start is read backwards in
# ``_named``: a tokenizer's special tokens (``pad_token=<|endoftext|>``) are not secrets.
_NAMED = re.compile(
    r"(?i)(password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key"
    r"|auth|credentials?)([\"']?[ \t]{0,8}[=:][ \t]{0,8}[\"']?)"
    r"(?!\[redacted\])([^\s\"',;&}\]]{3,})"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_NOT_SECRET = re.compile(r"(?i)(?:pad|eos|bos|unk|sep|cls|mask)_token")


def _named(match: re.Match[str]) -> str:
    text, start = match.string, match.start()
    while start > 0 and match.start() - start < 60 and text[start - 1] in _NAME_CHARS:
        start -= 1
    if _NOT_SECRET.fullmatch(text[start:match.end(1)]):
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


_WANDB_LOGIN = re.compile(r"(?i)(\bwandb[ \t]+login[ \t]+(?:--\S{1,30}[ \t]+){0,4})(\S{20,})")
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=\-]{12,})")
# scheme://user:password@host: the user stays, the password goes.
_URL_CREDENTIALS = re.compile(
    r"((?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^/\s:@]{0,200}:)([^/\s@]{1,200})@")


# ``Authorization: <scheme> <credentials>`` (or a bare value), in a header line, a curl ``-H``
# or a printed headers dict: whatever the scheme, what follows it is a credential.
_AUTH_HEADER = re.compile(
    r"(?i)(\b(?:proxy-)?authorization[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?"
    r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)[ \t]{1,8})?)"
    r"(?!\[redacted\])([^\s\"',;]{1,4000})")
# A command line's ``--password x`` / ``--hf-token=x`` (or the same flag and value as two items
# of a printed argv list): the flag names a secret, so even a one-character value is one.
_FLAG = re.compile(
    r"(?i)((?<![\w-])--?([\w-]{0,40}?(?:password|passwd|secret|token|api[_-]?key"
    r"|access[_-]?key|auth))(?:[\"'],?)?(?:[ \t]{1,8}[\"']?|=))(?!\[redacted\])(?!-)"
    r"([^\s\"',;]{1,200})")
# netrc: ``machine h login u password KEY`` on one line, or ``password KEY`` alone on its line.
_NETRC = re.compile(
    r"(?im)((?:\b(?:login|account)[ \t]+\S{1,200}[ \t]+|^[ \t]*)password[ \t]+)"
    r"(?!\[redacted\])(\S{1,200})(?=[ \t]*$|[ \t]+(?:machine|login|account|macdef|default)\b)")
# Another run's token: 43 URL-safe characters standing alone, with both cases and a digit or
# ``-``/``_`` (a hex digest, a lower-case identifier or a CamelCase word lacks one of them).
_RUN_TOKEN = re.compile(r"(?<![\w\-=+/])[\w\-]{43}(?![\w\-=+/])")
_TOKEN_CLASSES = (re.compile(r"[a-z]"), re.compile(r"[A-Z]"), re.compile(r"[0-9_\-]"))


def _flag(match: re.Match[str]) -> str:
    if _NOT_SECRET.fullmatch(match.group(2).replace("-", "_").lstrip("_")):
        return match.group(0)
    return match.group(1) + REDACTED


def _run_token(match: re.Match[str]) -> str:
    word = match.group(0)
    return REDACTED if all(c.search(word) for c in _TOKEN_CLASSES) and word.isascii() else word


def strip_terminal(text: str) -> str:
    """The text without terminal control sequences: what a person reads, nothing a terminal acts on."""
    return _TERMINAL.sub("", text)


def _without_private_keys(text: str) -> str:
    """PEM private keys (a service account's JSON, an SSH key) cut from BEGIN to END (or the
    end of the text); one forward pass, however many BEGINs there are."""
    out, at = [], 0
    while (begin := _PEM_BEGIN.search(text, at)) is not None:
        out.append(text[at:begin.start()] + REDACTED)
        end = _PEM_END.search(text, begin.end())
        at = end.end() if end is not None else len(text)
    return "".join(out) + text[at:] if out else text


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with terminal sequences stripped and secrets replaced by ``[redacted]``.

    ``extra``: exact secrets to remove too (a run's token: random, so no pattern knows it).
    """
    text = strip_terminal(text)
    for secret in extra:
        if secret and len(secret) >= 8:
            text = text.replace(secret, REDACTED)
    text = _KEYS.sub(REDACTED, _without_private_keys(text))
    text = _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", text)
    text = _BEARER.sub(rf"\1{REDACTED}", text)
    text = _AUTH_HEADER.sub(rf"\1{REDACTED}", text)
    text = _FLAG.sub(_flag, text)
    text = _NETRC.sub(rf"\1{REDACTED}", text)
    text = _RUN_TOKEN.sub(_run_token, text)
    text = _WANDB_LOGIN.sub(rf"\1{REDACTED}", text)
    return _NAMED.sub(_named, text)


def redact_optional(text: str | None, extra: Iterable[str] = ()) -> str | None:
    return None if text is None else redact(text, extra)
