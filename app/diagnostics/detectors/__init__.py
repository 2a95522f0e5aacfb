"""Detectors, one module per concern; each module lists its ``Detector``s (name, the metrics
they read, ``fn(view) -> list[Finding]``) in ``DETECTORS`` and keeps its thresholds as named
constants, each with its reason, at the top. The severity rule is in ``severity.py``."""

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
    numerics,
    rollouts,
    stalled,
    zero_spread,
)

_MODULES = (zero_spread, stalled, entropy, kl, length, hacking, divergence, collapse, numerics,
            dead_component, lost, rollouts, memory)
DETECTORS: tuple[Detector, ...] = tuple(d for m in _MODULES for d in m.DETECTORS)

__all__ = ["DETECTORS", "Detector"]
