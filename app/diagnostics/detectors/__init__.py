"""One detector per concern; each is ``detect(view) -> list[Finding]`` and keeps its
thresholds as named constants at the top of its module."""

from app.diagnostics.detectors import (
                                       collapse,
                                       dead_component,
                                       divergence,
                                       entropy,
                                       hacking,
                                       kl,
                                       length,
                                       lost,
                                       numerics,
                                       rollouts,
                                       stalled,
                                       zero_spread,
)

DETECTORS = (zero_spread.detect, stalled.detect, entropy.detect, kl.detect, length.detect,
             hacking.detect, divergence.detect, collapse.detect, numerics.detect,
             dead_component.detect, lost.detect, rollouts.detect)

__all__ = ["DETECTORS"]
