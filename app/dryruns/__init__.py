"""Dry runs: a spec's rewards scored on sampled completions, on a worker, with no training."""
