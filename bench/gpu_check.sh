#!/usr/bin/env bash
# GRPO Deck's overhead on a real GRPO run, CPU or CUDA (detected): bare TRL vs through the Deck.
# Needs no network (offline built-in model and data) and stops itself after 5 minutes.
# Usage: bench/gpu_check.sh [--steps N] [--model builtin:tiny-random] [--length 64]
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
exec timeout --signal=INT --kill-after=10 "${GPU_CHECK_SECONDS:-290}" "$PY" bench/gpu_check.py "$@"
