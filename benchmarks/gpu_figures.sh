#!/usr/bin/env bash
# Every figure only a CUDA machine gives, in one run (the README's GPU section and its MCP tool costs):
#   1. the worker process on CUDA (unload returns GPU memory; a device-side assert replaces the worker);
#   2. the MCP tools' seconds and GPU memory peaks (benchmarks/mcp_tool_costs.py; explain with the editor is
#      step 4's SciTX, so it is not built twice);
#   3. indexing throughput / raw forward for timm ViT-B/16 and open_clip ViT-B-16, with torch.compile;
#   4. SciTX seconds and memory peaks per stage at 512 and 1024 px (Qwen2.5-VL-7B + FLUX.1-Kontext-dev + ViT-B/16
#      architectures, random weights, bf16).
# Each step has its own time limit, so one that overruns costs only itself; each writes its JSON to $OUT and its
# log to $OUT/log.txt.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_figures.sh [STEP ...]   # from the repository root; STEP: worker_cuda,
#                                                             # mcp_tools, index_vit, index_clip, scitx (default all)
#
# A machine with no package index: wheels in .whl/ (pip download ... -d .whl) are installed into /tmp/site first
# (the packages NEMO needs that the machine's image lacks or has too old: transformers, diffusers, timm, ...).
set -u
OUT=${OUT:-gpu-figures}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOG="$OUT/log.txt"
export PYTHONPATH="$PWD" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        >>"$LOG" 2>&1 && export PYTHONPATH="/tmp/site:$PWD"
fi
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PY" -c "import torch, transformers, timm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__)"
    "$PY" -c "import diffusers, open_clip; print('diffusers', diffusers.__version__, 'open_clip', open_clip.__version__)"
} >>"$LOG" 2>&1

WANTED=" ${*:-worker_cuda mcp_tools index_vit index_clip scitx} "
step() {  # step NAME SECONDS COMMAND...: stdout to $OUT/NAME.out, stderr to the log
    local name=$1 limit=$2
    shift 2
    [[ $WANTED == *" $name "* ]] || return 0
    echo "== $name (limit ${limit}s) $(date -u +%T)" >>"$LOG"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.out" 2>>"$LOG"
    local rc=$?
    echo "== $name rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}

[ -f tests/core/test_worker_cuda.py ] &&
    step worker_cuda "${WORKER_S:-120}" "$PY" -m pytest -q -s -p no:cacheprovider tests/core/test_worker_cuda.py
[ -f benchmarks/mcp_tool_costs.py ] &&
    step mcp_tools "${MCP_S:-200}" "$PY" benchmarks/mcp_tool_costs.py --device cuda --no-editor --out "$OUT/mcp_tools_full.json"
step index_vit "${INDEX_S:-120}" "$PY" benchmarks/index_throughput.py --arch vit_base_patch16_224 --device cuda \
    --dtype bfloat16 --images 1024 --batch 64 --compile --json
step index_clip "${INDEX_S:-120}" "$PY" benchmarks/index_throughput.py --family open_clip --arch ViT-B-16 \
    --device cuda --dtype bfloat16 --images 1024 --batch 64 --json
step scitx "${SCITX_S:-300}" "$PY" benchmarks/scitx_gpu.py --device cuda --sizes 512 1024 --out "$OUT/scitx_runs.json"
exit 0
