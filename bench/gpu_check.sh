#!/usr/bin/env bash
# GRPO Deck's overhead on a real GRPO run, CPU or CUDA (detected): bare TRL vs through the Deck.
# Needs no network (offline built-in model and data) and stops itself after 5 minutes.
# Usage: bench/gpu_check.sh [--steps N] [--model builtin:tiny-random] [--length 64]
# Scaling, 1 vs N processes, bare accelerate launch vs through the Deck (4 trainings, each
# limited to a quarter of the time; stops itself after 590 s):
#   bench/gpu_check.sh --scaling 2            # a machine with 2+ GPUs
#   bench/gpu_check.sh --scaling 2 --cpu      # anywhere: proves the script on the CPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
"$PY" - <<'PY'
import torch
print("torch", torch.__version__, "| CUDA available:", torch.cuda.is_available(),
      "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU only")
PY
LIMIT="${GPU_CHECK_SECONDS:-290}"
EXTRA=()
if [[ " $* " == *" --scaling "* ]]; then
  LIMIT="${GPU_CHECK_SECONDS:-590}"
  EXTRA=(--side-seconds "$(( (LIMIT - 20) / 4 ))")
fi
exec timeout --signal=INT --kill-after=10 "$LIMIT" "$PY" bench/gpu_check.py "${EXTRA[@]}" "$@"
