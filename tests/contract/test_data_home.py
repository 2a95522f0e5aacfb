"""Where data lives (``grpodeck.contract.tasks.data_home``): GRPODECK_HOME when set, var/ in a
checkout, the user's data folder for an installed package (never beside site-packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpodeck.contract.tasks import data_home


def test_grpodeck_home_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_HOME", str(tmp_path / "deck"))
    assert data_home(tmp_path) == (tmp_path / "deck").resolve()


def test_a_checkout_keeps_data_in_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRPODECK_HOME", raising=False)
    (tmp_path / "app").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    assert data_home(tmp_path) == tmp_path / "var"


def test_an_installed_package_uses_the_users_data_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"  # what parents[2] is when installed
    (site / "app").mkdir(parents=True)
    monkeypatch.delenv("GRPODECK_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_home(site) == tmp_path / "xdg" / "grpodeck"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home(site) == tmp_path / "home" / ".local" / "share" / "grpodeck"
