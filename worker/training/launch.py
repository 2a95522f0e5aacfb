"""``accelerate launch`` for a run on many devices, tied to the supervisor like a single child.

The supervisor (the Celery pool process) starts this in a session of its own, as it starts a
single training child. Here accelerate's launcher runs in-process (torchrun's agent), so its
ranks are this process's children; before it starts them this process:

- dies with the supervisor (``lifeline``), taking its process group along; and
- puts its own pid in ``GRPODECK_SUPERVISOR_PID``, so each rank's lifeline ties the rank to this
  launcher: torchrun starts every rank in a session of its own, which a kill of this group does
  not reach, so each rank must notice on its own that its launcher is gone.

Run as ``python -m worker.training.launch <accelerate launch arguments>``.
"""

from __future__ import annotations

import os
import sys

from worker.training.child import SUPERVISOR_ENV


def main(argv: list[str] | None = None) -> int:
    from worker.training.lifeline import tie_to_parent

    if os.environ.get(SUPERVISOR_ENV):
        tie_to_parent(int(os.environ[SUPERVISOR_ENV]))
    os.environ[SUPERVISOR_ENV] = str(os.getpid())
    from accelerate.commands.launch import launch_command, launch_command_parser

    launch_command(launch_command_parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
