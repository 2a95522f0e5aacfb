"""Test reports that pytest-xdist can always send: text with lone surrogates escaped.

Why: an xdist worker sends each report to the controller through execnet, which encodes text
as UTF-8. A report holding a lone surrogate (hypothesis and schemathesis generate such strings,
and a test that prints one or fails on one puts it in its report) cannot be encoded: the worker
dies and the whole run ends in an INTERNALERROR with no summary, hiding which test failed and
every result after it. Here each string of a serialised report has its surrogates written as
``\\ud800``, so the test is reported with its text readable and the run goes on.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


def escape_surrogates(value: Any) -> Any:
    """``value`` with every string in it (nested in dicts, lists and tuples) encodable as
    UTF-8; other values as they are."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(escape_surrogates(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(
        config: pytest.Config, report: Any) -> Generator[None, Any, Any]:
    """xdist's worker serialises every test and collection report through this hook."""
    data = yield
    return escape_surrogates(data)
