"""Detectors, one module per concern; each module lists its ``Detector``s (name, the metrics
they read, ``fn(view) -> list[Finding]``) in ``DETECTORS`` and keeps its thresholds as named
constants, each with its reason, at the top, and, where a finding's remedy is a change of the
run's settings, that change in ``FIXES`` (category -> ``app.diagnostics.fix.Fix``). The
severity rule is in ``severity.py``."""

from app.diagnostics.detector import Detector
from app.diagnostics.detectors import (
    collapse,
    dead_component,
    divergence,
    entropy,
    hacking,
    kl,
    length,
    lost,
    memory,
    no_signal,
    numerics,
    rollouts,
    stalled,
    zero_spread,
)
from app.diagnostics.fix import Fix

_MODULES = (no_signal, zero_spread, stalled, entropy, kl, length, hacking, divergence, collapse, numerics,
            dead_component, lost, rollouts, memory)
DETECTORS: tuple[Detector, ...] = tuple(d for m in _MODULES for d in m.DETECTORS)
# category -> its settings fix ("Try this fix"), declared by the module that finds it
FIXES: dict[str, Fix] = {c: f for m in _MODULES for c, f in getattr(m, "FIXES", {}).items()}

__all__ = ["DETECTORS", "FIXES", "Detector"]
