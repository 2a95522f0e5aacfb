"""A module prefix in ``GRPODECK_CUSTOM_REWARDS`` opens the functions that module DEFINES, not
the names it imports (issue 33: ``from subprocess import run`` opened ``mod:run``)."""

from __future__ import annotations

import pytest

from worker.rewards.text import custom

MODULE = "tests.rewards.prefix_module"


@pytest.fixture(autouse=True)
def prefix_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", MODULE)


def test_an_imported_name_is_refused_through_a_prefix() -> None:
    with pytest.raises(ValueError, match=r"is not defined in tests\.rewards\.prefix_module"):
        custom(f"{MODULE}:run")


def test_a_function_the_module_defines_is_allowed() -> None:
    assert custom(f"{MODULE}:length")(prompts=["p"], completions=["abc"]) == [3.0]


def test_an_exact_entry_still_names_what_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment that lists ``module:function`` exactly chose that object, re-export or not."""
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", f"{MODULE}:length")
    assert custom(f"{MODULE}:length")(prompts=["p"], completions=["ab"]) == [2.0]
    with pytest.raises(ValueError, match="refused on this worker"):
        custom(f"{MODULE}:run")
