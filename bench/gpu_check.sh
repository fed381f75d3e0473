#!/usr/bin/env bash
# The prepared GPU check: everything a first GPU launch of chunkwise's training depends on, in
# under 12 minutes on one H100 or H200 that has torch, transformers, accelerate and peft (no
# deepspeed, flash-attn, vLLM or network). Each phase (bench/gpu_check.py) runs under its own
# `timeout`; one JSON summary is printed at the end (and written to OUT/summary.json).
#
#   bash bench/gpu_check.sh [--out DIR] [--layers N]      # on the GPU machine
#   bash bench/gpu_check.sh --dry-run [--out DIR]         # every phase on CPU, tiny sizes (CI)
#
# Budget (seconds, each phase's timeout): env 45, sdpa 90, resume 135, pretrained 75,
# gpu_train 180, generate 75, eval2 120 = 720 s = 12 minutes at most.
# --layers: layers of the Llama-3.1-8B shape used by gpu_train and generate (default 8 of 32,
# so 128K tokens fit one H100 with AdamW states; the JSON says how many).
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=""
OUT=""
LAYERS=8
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY="--dry-run" ;;
    --out) OUT="$2"; shift ;;
    --layers) LAYERS="$2"; shift ;;
    *) echo "gpu_check.sh: unknown argument $1 (--dry-run, --out DIR, --layers N)" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d -t gpu_check-XXXXXX)}"
mkdir -p "$OUT"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
export TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled HF_HUB_OFFLINE=1

phase() {  # phase NAME SECONDS: bench/gpu_check.py NAME under timeout; rc in OUT/NAME.rc
  local name="$1" limit="$2"
  echo "gpu_check: $name (at most ${limit}s)" >&2
  timeout --kill-after=10 "$limit" "$PY" bench/gpu_check.py "$name" --out "$OUT" $DRY \
    --layers "$LAYERS" --timeout "$((limit - 15))" >"$OUT/$name.log" 2>&1
  echo $? >"$OUT/$name.rc"
  tail -n 1 "$OUT/$name.log" >&2
}

phase env 45
phase sdpa 90
phase resume 135
phase pretrained 75
phase gpu_train 180
phase generate 75
phase eval2 120
"$PY" bench/gpu_check.py summary --out "$OUT" | tee "$OUT/summary.json"
