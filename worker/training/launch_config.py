"""The accelerate (and DeepSpeed) configuration of a run on many devices (issue 26).

A spec with ``num_processes > 1`` trains under ``accelerate launch``: this module turns the spec
and the worker's own devices into the files accelerate reads (``accelerate.yaml``, and
``deepspeed.json`` for ZeRO-2/3) in the run folder, and into the command the supervisor starts.
The files are what ``accelerate config`` would write, so a person can rerun the same launch by
hand; they depend only on the spec and the worker's devices, so the same spec on the same kind
of worker always gets the same files.

A CPU worker trains with plain data parallelism over gloo: accelerate's ``--cpu`` flag would pick
its simple launcher, which starts a single process unless MPI is installed, so the config asks for
torchrun's launcher (``MULTI_GPU``) and the trainer's ``use_cpu`` (``worker.training.hardware``)
makes each rank join over gloo instead of NCCL.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from grpodeck.contract.spec import RunSpec
    from grpodeck.contract.tasks import WorkerCapabilities

ACCELERATE_FILE = "accelerate.yaml"
DEEPSPEED_FILE = "deepspeed.json"
ZERO_STAGES = {"deepspeed_zero2": 2, "deepspeed_zero3": 3}


def launch_problem(spec: RunSpec, caps: WorkerCapabilities) -> str | None:
    """Why this worker cannot start ``spec`` on its devices, or None. The web app checks the
    same against the workers' reports; this is the check of the worker the run landed on (with
    the embedded broker no report reaches the web app)."""
    n = spec.num_processes
    if caps["cuda"]:
        gpus = len(caps.get("devices") or []) or 1
        if n > gpus:
            return f"num_processes={n} needs {n} GPUs and this worker has {gpus}"
        if spec.distributed.startswith("deepspeed") and not caps.get("deepspeed"):
            return f"distributed={spec.distributed} needs the deepspeed package on the worker"
        return None
    if spec.distributed != "ddp":
        return (f"distributed={spec.distributed} needs GPUs; this CPU worker trains on many "
                "processes with ddp (gloo) only")
    if n > caps.get("cpu_count", 1):
        return f"num_processes={n} is more than this worker's {caps.get('cpu_count', 1)} CPU cores"
    if spec.mixed_precision == "fp16":
        return "mixed_precision=fp16 needs a GPU"
    return None


def precision(spec: RunSpec, caps: WorkerCapabilities) -> str:
    """accelerate's ``mixed_precision`` for the spec: "auto" is bf16 on a GPU (the trainer
    falls back to fp16 where the GPU lacks bf16, ``hardware_kwargs``), none on a CPU."""
    if spec.mixed_precision != "auto":
        return spec.mixed_precision
    return "bf16" if caps["cuda"] else "no"


def deepspeed_config(spec: RunSpec) -> dict[str, Any] | None:
    """The DeepSpeed JSON for ZeRO-2/3, or None. Batch sizes, accumulation, clipping and
    precision are "auto": the transformers Trainer fills them from the run's GRPOConfig, so they
    can never disagree with it."""
    stage = ZERO_STAGES.get(spec.distributed)
    if stage is None:
        return None
    zero: dict[str, Any] = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                            "reduce_bucket_size": "auto"}
    if stage == 3:
        zero.update({"stage3_gather_16bit_weights_on_model_save": True,
                     "stage3_prefetch_bucket_size": "auto",
                     "stage3_param_persistence_threshold": "auto"})
    return {"zero_optimization": zero, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
            "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto", "gradient_clipping": "auto"}


FSDP_CONFIG = {  # FSDP2: shard parameters, gradients and optimizer state by transformer block
    "fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "fsdp_reshard_after_forward": True, "fsdp_state_dict_type": "SHARDED_STATE_DICT",
    "fsdp_cpu_ram_efficient_loading": True, "fsdp_offload_params": False,
    "fsdp_activation_checkpointing": False,
}


def accelerate_config(spec: RunSpec, caps: WorkerCapabilities,
                      deepspeed_file: str | None = None) -> dict[str, Any]:
    """The ``accelerate config`` YAML's fields for the spec on this worker."""
    kind = {"ddp": "MULTI_GPU", "fsdp": "FSDP"}.get(spec.distributed, "DEEPSPEED")
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE", "distributed_type": kind,
        "num_machines": 1, "machine_rank": 0, "num_processes": spec.num_processes,
        "gpu_ids": "all", "rdzv_backend": "static", "same_network": True, "use_cpu": False,
        "main_training_function": "main", "downcast_bf16": "no",
        "mixed_precision": precision(spec, caps),
    }
    if kind == "DEEPSPEED":
        # With a DeepSpeed file, precision lives there ("auto" = the GRPOConfig's): accelerate
        # refuses a mixed_precision beside it.
        del config["mixed_precision"]
        config["deepspeed_config"] = {"deepspeed_config_file": deepspeed_file or DEEPSPEED_FILE,
                                      "zero3_init_flag": spec.distributed == "deepspeed_zero3"}
    elif kind == "FSDP":
        config["fsdp_config"] = dict(FSDP_CONFIG)
    return config


def write_launch_files(spec: RunSpec, caps: WorkerCapabilities, folder: Path) -> list[Path]:
    """Write the run's accelerate YAML (first) and DeepSpeed JSON (if any) into ``folder``."""
    written = []
    ds = deepspeed_config(spec)
    ds_path = folder / DEEPSPEED_FILE
    if ds is not None:
        ds_path.write_text(json.dumps(ds, indent=2) + "\n")
    config = accelerate_config(spec, caps, str(ds_path) if ds is not None else None)
    path = folder / ACCELERATE_FILE
    header = ("# accelerate launch config of this run (written by the GRPO Deck worker)\n"
              + ("# CPU worker: torchrun's launcher; the ranks train on CPU over gloo\n"
                 if not caps["cuda"] else ""))
    path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    written.append(path)
    if ds is not None:
        written.append(ds_path)
    return written


def free_port() -> int:
    """A free TCP port for the ranks' rendezvous: two runs on one worker must not share one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_command(spec: RunSpec, caps: WorkerCapabilities, config_file: Path,
                   child_args: list[str], port: int) -> list[str]:
    """``python -m worker.training.launch`` (accelerate's launcher, tied to the supervisor)
    starting ``spec.num_processes`` copies of the training child; each gets its share of the
    CPU cores for its torch threads."""
    threads = max(1, caps.get("cpu_count", 1) // spec.num_processes)
    return [sys.executable, "-m", "worker.training.launch", "--config_file", str(config_file),
            "--num_processes", str(spec.num_processes), "--main_process_port", str(port),
            "--num_cpu_threads_per_process", str(threads),
            "-m", "worker.training.child", *child_args]
