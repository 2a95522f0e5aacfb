"""A loop reporting with ``grpodeck.client.init`` as its own process, for tests/client: logs
``--steps`` rows (``loss`` = 1/step) and README-shaped rollouts every ``--rollout-every`` steps
as fast as it can, then ``finish`` (waiting at most ``--finish-deadline`` s) and exits."""

from __future__ import annotations

import argparse

import grpodeck.client


def groups(step: int) -> list[dict]:  # type: ignore[type-arg]
    """One group per step, README-shaped (no total); its rewards tell the step apart."""
    return [{"index": 0, "prompt": f"prompt {step}",
             "completions": [{"text": f"answer {step}.{i}", "rewards": {"correct": (step + i) % 3
                                                                        / 2},
                              "advantage": float(i - 1)} for i in range(3)]}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--spool", required=True)
    parser.add_argument("--name", default="offline-loop")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rollout-every", type=int, default=1)
    parser.add_argument("--finish-deadline", type=float, default=1.0)
    a = parser.parse_args()
    run = grpodeck.client.init(a.url, a.name, config={"lr": 0.1}, spool_dir=a.spool,
                               flush_seconds=0.2, finish_deadline=a.finish_deadline,
                               system_metrics=False)
    for step in range(1, a.steps + 1):
        run.log({"loss": 1.0 / step}, step=step)
        if step % a.rollout_every == 0:
            run.log_rollouts(step, groups(step))
    run.finish()


if __name__ == "__main__":
    main()
