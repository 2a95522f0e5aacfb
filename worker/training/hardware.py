"""Pick precision/device settings from the hardware this worker actually has.

TRL's configs default ``bf16`` to True when ``fp16`` is unset, which fails or crawls on a CPU, so
the worker decides explicitly. Activation (gradient) checkpointing, TRL's default, only pays off
when accelerator memory is tight; on CPU with small models it just costs ~20% time. (transformers
5.x renamed ``gradient_checkpointing`` to ``activation_checkpointing``; the new name wins.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpodeck.contract.tasks import Device


def hardware_kwargs() -> dict[str, Any]:
    """GRPOConfig keyword arguments suited to the local device (CUDA GPU or CPU)."""
    import torch

    if torch.cuda.is_available():
        bf16 = torch.cuda.is_bf16_supported()
        return {"use_cpu": False, "bf16": bf16, "fp16": not bf16, "activation_checkpointing": True}
    return {"use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": False,
            "dataloader_num_workers": 0}


def describe() -> str:
    """One line for the run log: which device trains this run."""
    import torch

    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} (x{torch.cuda.device_count()})"
    return f"cpu: {torch.get_num_threads()} threads"


def devices() -> list[Device]:
    """Each CUDA device this process sees: index, name and total memory (none on a CPU)."""
    import torch

    if not torch.cuda.is_available():
        return []
    found: list[Device] = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append({"index": index, "name": str(props.name)[:100],
                      "memory_bytes": int(props.total_memory)})
    return found
