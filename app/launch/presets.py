"""``GET /api/presets``: the ready-made experiments (``grpodeck.contract.presets``) as JSON."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, status

from grpodeck.contract.presets import PRESETS, Preset

router = APIRouter(prefix="/api/presets", tags=["presets"])


def preset_or_404(name: str) -> Preset:
    """The preset called ``name``; 404 naming the known ones otherwise."""
    preset = PRESETS.get(name)
    if preset is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"unknown preset {name[:60]!r}; known: {', '.join(PRESETS)}")
    return preset


@router.get("")
def list_presets() -> list[dict[str, Any]]:
    """Every preset: name, label, description, the run spec it fills in, and for a sweep the
    values to launch (``POST /api/sweeps``)."""
    return [p.as_json() for p in PRESETS.values()]


@router.get("/{name}")
def get_preset(name: str) -> dict[str, Any]:
    return preset_or_404(name).as_json()
