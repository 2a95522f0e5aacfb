"""The supervisor's side of a run on many devices: the command that starts it, and its files.

A spec with one process keeps the plain child command. With more, the worker checks its own
devices (``worker.capabilities``: found once per worker by a child process), writes the
accelerate/DeepSpeed files into the run folder (``launch_config``) and writes them at the top
of the run's stdout, so the run's log on the run page shows the exact configuration the ranks
were started with (the same bytes as the files; paths are redacted like every log line).
"""

from __future__ import annotations

from typing import IO, Any

from grpodeck.contract.log_markers import launch_line
from worker.training.launch_config import (
    free_port,
    launch_command,
    launch_problem,
    write_launch_files,
)


def multi_process_command(spec_data: dict[str, Any], out: Any, child_command: list[str],
                          stdout: IO[bytes]) -> list[str]:
    """``child_command`` for a single-process spec; else the launcher's command, after the
    files are written and shown. Raises ValueError when this worker cannot run the spec."""
    from grpodeck.contract.spec import RunSpec

    spec = RunSpec.model_validate(spec_data)
    if spec.num_processes == 1:
        return child_command
    from worker.capabilities import capabilities

    caps = capabilities()
    problem = launch_problem(spec, caps)
    if problem:
        raise ValueError(problem)
    files = write_launch_files(spec, caps, out)
    devices = ", ".join(d["name"] for d in caps.get("devices") or []) or caps["device"]
    lines = [launch_line(spec.num_processes, spec.distributed, devices)]
    for path in files:
        lines.append(f"[grpodeck] --- {path.name} ---\n{path.read_text()}")
    stdout.write("".join(lines).encode())
    stdout.flush()
    child_args = child_command[child_command.index("-m") + 2:]
    return launch_command(spec, caps, files[0], child_args, free_port())
