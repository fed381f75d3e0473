#!/usr/bin/env bash
# Long-sequence training throughput on ONE GPU (prepared for an H200): a Llama-3.1-8B-shaped
# model with random weights, bf16, at 32K and 128K tokens per sequence. Prints JSON with
# tokens/s, MFU and peak memory per length (bench/gpu_train.py).
#
#   bash bench/gpu_train.sh                      # both lengths, 3 timed steps each
#   bash bench/gpu_train.sh --activation-offload # checkpointed activations in CPU memory
#
# Needs torch (CUDA), transformers >= 5 and this repository's src/ (no install needed);
# flash-attn and liger-kernel are used when installed, else PyTorch SDPA and plain kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3
  fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
export TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
exec "$PY" bench/gpu_train.py --seq-lens "${SEQ_LENS:-32768,131072}" --steps "${STEPS:-3}" "$@"
