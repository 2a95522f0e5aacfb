"""The accelerate / DeepSpeed files and the launch command of a run on many devices (issue 26).

DeepSpeed and vLLM do not install on this CPU machine: their paths are checked here by the
files and GRPOConfig arguments they get; the CPU (gloo) path trains for real in
tests/integration/test_multi_device.py. The YAML is read back by accelerate's own config
loader, so a field accelerate does not know fails here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from accelerate.commands.config.config_args import ClusterConfig

from grpodeck.contract.spec import RunSpec
from grpodeck.contract.tasks import WorkerCapabilities
from tests.conftest import tiny_spec
from worker.training.config import grpo_kwargs, precision_kwargs
from worker.training.launch_config import (
    accelerate_config,
    deepspeed_config,
    launch_command,
    launch_problem,
    write_launch_files,
)

CPU = WorkerCapabilities(cuda=False, vllm=False, device="cpu: 2 threads", devices=[],
                         deepspeed=False, cpu_count=2)
GPUS = WorkerCapabilities(cuda=True, vllm=True, device="cuda: H200 (x4)", deepspeed=True,
                          cpu_count=32, devices=[{"index": i, "name": "NVIDIA H200",
                                                  "memory_bytes": 1 << 37} for i in range(4)])


def spec(**overrides: Any) -> RunSpec:
    return RunSpec.model_validate(tiny_spec(**overrides))


def written(tmp_path: Path, s: RunSpec, caps: WorkerCapabilities) -> dict[str, Any]:
    files = write_launch_files(s, caps, tmp_path)
    assert files[0].name == "accelerate.yaml"
    loaded = ClusterConfig.from_yaml_file(str(files[0]))  # accelerate's own reader
    assert loaded.num_processes == s.num_processes
    return yaml.safe_load(files[0].read_text())


def test_ddp_on_a_cpu_worker_uses_torchrun_without_precision(tmp_path: Path) -> None:
    config = written(tmp_path, spec(num_processes=2), CPU)
    assert config["distributed_type"] == "MULTI_GPU" and config["use_cpu"] is False
    assert config["mixed_precision"] == "no" and config["num_processes"] == 2
    assert "CPU worker" in (tmp_path / "accelerate.yaml").read_text()
    assert not (tmp_path / "deepspeed.json").exists()


def test_ddp_on_gpus_takes_the_spec_precision(tmp_path: Path) -> None:
    assert written(tmp_path, spec(num_processes=4), GPUS)["mixed_precision"] == "bf16"
    assert written(tmp_path, spec(num_processes=4, mixed_precision="fp16"),
                   GPUS)["mixed_precision"] == "fp16"
    assert written(tmp_path, spec(num_processes=4, mixed_precision="no"),
                   GPUS)["mixed_precision"] == "no"


@pytest.mark.parametrize("kind,stage", [("deepspeed_zero2", 2), ("deepspeed_zero3", 3)])
def test_deepspeed_gets_its_json_with_auto_values(tmp_path: Path, kind: str, stage: int) -> None:
    config = written(tmp_path, spec(num_processes=2, distributed=kind), GPUS)
    assert config["distributed_type"] == "DEEPSPEED"
    assert "mixed_precision" not in config  # accelerate refuses it beside a DeepSpeed file
    ds_file = Path(config["deepspeed_config"]["deepspeed_config_file"])
    assert ds_file == tmp_path / "deepspeed.json"
    assert config["deepspeed_config"]["zero3_init_flag"] is (stage == 3)
    ds = json.loads(ds_file.read_text())
    assert ds == deepspeed_config(spec(num_processes=2, distributed=kind))
    assert ds["zero_optimization"]["stage"] == stage
    assert ds["bf16"] == {"enabled": "auto"} and ds["train_micro_batch_size_per_gpu"] == "auto"
    assert ("stage3_gather_16bit_weights_on_model_save" in ds["zero_optimization"]) is (stage == 3)


def test_fsdp_gets_an_fsdp2_section(tmp_path: Path) -> None:
    config = written(tmp_path, spec(num_processes=2, distributed="fsdp"), GPUS)
    assert config["distributed_type"] == "FSDP"
    assert config["fsdp_config"]["fsdp_version"] == 2
    assert config["fsdp_config"]["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert "fsdp_config" not in accelerate_config(spec(num_processes=2), GPUS)


def test_the_files_depend_only_on_spec_and_devices(tmp_path: Path) -> None:
    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir(), two.mkdir()
    s = spec(num_processes=2, distributed="fsdp")
    assert (write_launch_files(s, GPUS, one)[0].read_text()
            == write_launch_files(s, GPUS, two)[0].read_text())


def test_launch_command_starts_the_child_module_under_the_tied_launcher(tmp_path: Path) -> None:
    command = launch_command(spec(num_processes=2), CPU, tmp_path / "accelerate.yaml",
                             ["--spec", "s.json", "--run-id", "7"], 29999)
    assert command[:3] == [sys.executable, "-m", "worker.training.launch"]
    assert command[command.index("--num_processes") + 1] == "2"
    assert command[command.index("--main_process_port") + 1] == "29999"
    assert command[command.index("--num_cpu_threads_per_process") + 1] == "1"
    assert command[-6:] == ["-m", "worker.training.child", "--spec", "s.json", "--run-id", "7"]


@pytest.mark.parametrize("overrides,caps,words", [
    ({"num_processes": 3}, CPU, "more than this worker's 2 CPU cores"),
    ({"num_processes": 2, "distributed": "fsdp"}, CPU, "needs GPUs"),
    ({"num_processes": 2, "mixed_precision": "fp16"}, CPU, "fp16 needs a GPU"),
    ({"num_processes": 5}, GPUS, "needs 5 GPUs and this worker has 4"),
    ({"num_processes": 2, "distributed": "deepspeed_zero2"}, {**GPUS, "deepspeed": False},
     "needs the deepspeed package"),
])
def test_the_worker_refuses_what_its_devices_cannot_do(overrides: dict[str, Any],
                                                       caps: WorkerCapabilities,
                                                       words: str) -> None:
    problem = launch_problem(spec(**overrides), caps)
    assert problem is not None and words in problem


def test_the_worker_accepts_what_its_devices_can_do() -> None:
    assert launch_problem(spec(num_processes=2), CPU) is None
    assert launch_problem(spec(num_processes=4, distributed="deepspeed_zero3"), GPUS) is None


def test_mixed_precision_maps_to_grpo_config_flags() -> None:
    cpu = {"use_cpu": True}
    assert precision_kwargs(spec(), cpu) == {}  # auto: the hardware's choice, as before
    assert precision_kwargs(spec(mixed_precision="bf16"), cpu) == {"bf16": True, "fp16": False}
    assert precision_kwargs(spec(mixed_precision="no"), {}) == {"bf16": False, "fp16": False}
    assert precision_kwargs(spec(mixed_precision="fp16"), {}) == {"bf16": False, "fp16": True}
    with pytest.raises(ValueError, match="fp16 needs a GPU"):
        precision_kwargs(spec(mixed_precision="fp16"), cpu)
    kwargs = grpo_kwargs(spec(mixed_precision="bf16"), "/tmp/out")
    assert kwargs["bf16"] is True and kwargs["use_cpu"] is True


def test_vllm_mode_and_memory_share_reach_grpo_config_only_with_vllm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = grpo_kwargs(spec(vllm_mode="server", vllm_gpu_memory_utilization=0.5), "/tmp/o")
    assert "vllm_mode" not in kwargs and kwargs["use_vllm"] is False
    from worker.training import config

    # No GPU and no vllm here: the worker's own check (tested in test_training_config) would
    # refuse before the mapping under test.
    monkeypatch.setattr(config, "check_vllm", lambda wanted: wanted)
    kwargs = grpo_kwargs(spec(use_vllm=True, vllm_mode="server",
                              vllm_gpu_memory_utilization=0.5), "/tmp/o")
    assert (kwargs["use_vllm"], kwargs["vllm_mode"],
            kwargs["vllm_gpu_memory_utilization"]) == (True, "server", 0.5)
