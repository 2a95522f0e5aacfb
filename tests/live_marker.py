"""Which tests are ``live`` (``make test-fast`` leaves them out): the folders and modules that
start a stack, a browser, packaging venvs or ``grpodeck up``, and any test that starts a stack
itself, through a fixture or through a helper of the suite. Found from the code, so a new live
test needs no mark by hand."""

from __future__ import annotations

import inspect
from types import CodeType
from typing import Any

import pytest

from tests.stack import Stack

LIVE_PATHS = ("tests/integration/", "tests/e2e/", "tests/packaging/", "tests/test_benches.py",
              "tests/test_up.py", "tests/test_worker_cli.py")


def starts_a_stack(func: Any, depth: int = 0) -> bool:
    """Whether ``func``'s code (its nested functions, and the suite's helpers it calls, a few
    calls deep) names a ``Stack`` class."""
    func = inspect.unwrap(func) if func is not None else None
    code = getattr(func, "__code__", None)
    return code is not None and _code_starts_a_stack(code, func.__globals__, depth)


def _code_starts_a_stack(code: CodeType, scope: dict[str, Any], depth: int) -> bool:
    for name in code.co_names:
        found = scope.get(name)
        if isinstance(found, type) and issubclass(found, Stack):
            return True
        if (inspect.isfunction(found) and found.__module__.startswith("tests.") and depth < 3
                and starts_a_stack(found, depth + 1)):
            return True
    return any(_code_starts_a_stack(const, scope, depth) for const in code.co_consts
               if isinstance(const, CodeType))


def is_live(item: pytest.Item) -> bool:
    """In a live folder, on a page of the browser, or starting a ``Stack``."""
    if item.nodeid.startswith(LIVE_PATHS) or "page" in getattr(item, "fixturenames", ()):
        return True
    info = getattr(item, "_fixtureinfo", None)
    funcs = [getattr(item, "function", None)] + [
        defs[-1].func for defs in (info.name2fixturedefs.values() if info else ()) if defs]
    return any(starts_a_stack(f) for f in funcs)
