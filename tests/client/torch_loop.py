"""The README's "plain PyTorch loop" recipe, run as its own process by tests/client: a tiny
model, a real optimizer, ``grpodeck.client.init`` / ``log`` / ``finish``. Writes the losses it
logged to ``--out`` so the test can compare them with what the Deck stored."""

from __future__ import annotations

import argparse
import json

import torch

import grpodeck.client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=8)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    logged = []
    with grpodeck.client.init(url=a.url, name="torch-loop", config={"lr": 0.05, "model": {
            "kind": "linear", "inputs": 4}}, tags=["recipe"], group="plain-torch",
            flush_seconds=0.2) as run:
        for step in range(1, a.steps + 1):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.log({"loss": loss, "lr": optimizer.param_groups[0]["lr"]}, step=step)
            logged.append(loss.item())
            if run.should_stop:  # cancelled on the Deck, or stopped by its guard rail
                break
    with open(a.out, "w") as fh:
        json.dump({"run": run.id, "losses": logged, "status": run.status}, fh)


if __name__ == "__main__":
    main()
