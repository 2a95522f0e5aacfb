"""OOM risk: the GPU memory torch's allocator holds stays near the device's total.

Read from the system metrics the client samples (``grpodeck.client.system``): per device,
``system/gpu{i}/mem_reserved_bytes`` against ``system/gpu{i}/mem_total_bytes``. Reserved, not
allocated: the caching allocator keeps freed blocks, and what it holds is what the next larger
batch (a longer completion, a bigger group) has to fit beside. A run without GPU metrics (CPU
training, a script that reports none) is left unchecked, never called safe or at risk.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.model import Finding
from app.diagnostics.stats import r3
from app.diagnostics.view import View

RESERVED = "system/gpu*/mem_reserved_bytes"
TOTAL = "system/gpu*/mem_total_bytes"
CATEGORY = "oom_risk"
RISK_SHARE = 0.95  # above this, one longer completion or bigger group can end in CUDA OOM
MIN_SAMPLES = 3  # consecutive samples above it: a brief peak (one long batch) is no pattern
MAX_LISTED = 10  # steps and values quoted in the evidence

ACTIONS = [("Lower per_device_train_batch_size (or num_generations) and raise "
            "gradient_accumulation_steps to keep the effective batch"),
           "Turn on gradient checkpointing (gradient_checkpointing=True)",
           "With vLLM colocated, lower vllm_gpu_memory_utilization so training keeps headroom",
           "Lower max_completion_length if completions run long"]


def longest_stretch(above: np.ndarray) -> tuple[int, int]:
    """(start, end) indices, end exclusive, of the longest run of True in ``above`` (the
    latest of equal ones); (0, 0) when there is none."""
    best, start = (0, 0), None
    for i, flag in enumerate([*above.tolist(), False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if i - start >= best[1] - best[0]:
                best = (start, i)
            start = None
    return best


def _device(view: View, reserved_name: str) -> Finding | None:
    reserved = view.series(reserved_name)
    total_hist = view.hist(reserved_name.replace("mem_reserved_bytes", "mem_total_bytes"))
    if reserved is None or total_hist is None or not total_hist.gmax or total_hist.gmax <= 0:
        return None
    total = float(total_hist.gmax)
    share = reserved.values / total
    lo, hi = longest_stretch(share > RISK_SHARE)
    if hi - lo < MIN_SAMPLES:
        return None
    gpu = reserved_name.split("/")[1]
    steps, shares = reserved.steps[lo:hi], share[lo:hi]
    first, last = round(steps[0]), round(steps[-1])
    return Finding(
        category=CATEGORY, severity="warning", first_step=first, last_step=last,
        summary=(f"GPU memory reserved on {gpu} stayed above {RISK_SHARE:.0%} of the device "
                 f"for {hi - lo} samples in a row (steps {first} to {last}, peak "
                 f"{float(shares.max()):.1%}): a longer batch can run out of memory."),
        evidence={"gpu": gpu, "reserved_share_peak": r3(float(shares.max())),
                  "reserved_share_median": r3(float(np.median(shares))),
                  "total_bytes": total, "samples_above": hi - lo,
                  "threshold_share": RISK_SHARE, "consecutive_samples_needed": MIN_SAMPLES,
                  "steps": [round(s) for s in steps[:MAX_LISTED]],
                  "reserved_shares": [r3(float(v)) for v in shares[:MAX_LISTED]]},
        actions=ACTIONS, metric=reserved_name)


def detect(view: View) -> list[Finding]:
    names = sorted(n for n in view.metrics if fnmatchcase(n, RESERVED))
    return [f for f in (_device(view, n) for n in names) if f is not None]


DETECTORS = (Detector("oom_risk", (RESERVED, TOTAL), detect),)
