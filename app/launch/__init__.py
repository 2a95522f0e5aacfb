"""Launching a run: the new-run form, presets, rewards, worker capabilities, dry-run and
smoke-test buttons, sweeps, ``POST /api/runs``, and handing the stored run to the queue."""
