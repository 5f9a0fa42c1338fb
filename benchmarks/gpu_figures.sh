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
#                                                             # mcp_tools, index_vit, index_clip, scitx, or
#                                                             # issue 40's (the default; about 10 minutes in all,
#                                                             # model building included): index_cpu_decode,
#                                                             # index_gpu_decode, profile_80, profile_24
#                                                             # (profile_48 on request); "all" = every step
#   DRY=1 OUT=/tmp/dry bash benchmarks/gpu_figures.sh        # the same flow on the CPU at toy sizes (no GPU)
#
# Issue 40's steps: indexing throughput / raw forward of timm ViT-B/16 (batch 64, 500x375 JPEGs) with the CPU and
# the GPU decode path; SciTX per stage (seconds, tokens, tokens/s, peak memory) under the "80 GB" and "24 GB"
# profiles, the process capped at the profile's size (torch.cuda.set_per_process_memory_fraction), with the
# default token caps and with realistic ones (benchmarks/scitx_profiles.py says which is which).
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
DEVICE=cuda
TINY=""
if [ "${DRY:-0}" = 1 ]; then  # the flow on the CPU: toy sizes, short limits
    DEVICE=cpu
    TINY="--tiny"
fi
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi (DRY=$DRY)"
    "$PY" -c "import torch, transformers, timm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__)"
    "$PY" -c "import diffusers, open_clip; print('diffusers', diffusers.__version__, 'open_clip', open_clip.__version__)"
} >>"$LOG" 2>&1

WANTED=" ${*:-index_cpu_decode index_gpu_decode profile_80 profile_24} "
[[ $WANTED == " all " ]] && WANTED=" worker_cuda mcp_tools index_vit index_clip scitx index_cpu_decode index_gpu_decode \
profile_80 profile_48 profile_24 "
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

# -- issue 40 ---------------------------------------------------------------------------------------------------
if [ "${DRY:-0}" = 1 ]; then
    INDEX_ARGS=(--arch resnet18 --device cpu --dtype float32 --images 16 --batch 8 --repeats 1 --json)
else
    INDEX_ARGS=(--arch vit_base_patch16_224 --device cuda --dtype bfloat16 --images 1024 --batch 64 --json)
fi
step index_cpu_decode "${INDEX40_S:-90}" "$PY" benchmarks/index_throughput.py "${INDEX_ARGS[@]}" --decode cpu
step index_gpu_decode "${INDEX40_S:-90}" "$PY" benchmarks/index_throughput.py "${INDEX_ARGS[@]}" --decode gpu
step profile_80 "${PROFILE80_S:-240}" "$PY" benchmarks/scitx_profiles.py --profile "80 GB" --device "$DEVICE" $TINY \
    --unbatched --out "$OUT/profile_80.json"
step profile_48 "${PROFILE48_S:-180}" "$PY" benchmarks/scitx_profiles.py --profile "48 GB" --device "$DEVICE" $TINY \
    --only realistic --out "$OUT/profile_48.json"
step profile_24 "${PROFILE24_S:-180}" "$PY" benchmarks/scitx_profiles.py --profile "24 GB" --device "$DEVICE" $TINY \
    --only realistic --out "$OUT/profile_24.json"
# One summary line per figure (the issue's table): indexing ratio per decode path; per profile and run, SciTX's
# seconds, per-stage tokens and tokens/s, and the peak memory.
"$PY" - "$OUT" <<'PYEOF' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("index_cpu_decode", "index_gpu_decode"):
    f = out / f"{name}.out"
    try:
        d = json.loads(f.read_text())
        print(f"{name}: end-to-end / raw forward {d['end_to_end_over_raw_forward']:.3f} "
              f"({d['end_to_end_index_stage_img_per_s']:.0f} of {d['raw_forward_img_per_s']:.0f} img/s, "
              f"{d['device']}, batch {d['batch']}){' notes: ' + '; '.join(d['decode_notes']) if d['decode_notes'] else ''}")
    except Exception as exc:  # a step that did not run or failed: say so
        print(f"{name}: no figure ({type(exc).__name__})")
for name in ("profile_80", "profile_48", "profile_24"):
    f = out / f"{name}.json"
    if not f.exists():
        print(f"{name}: no figure")
        continue
    d = json.loads(f.read_text())
    if d.get("failed"):
        print(f"{name}: {d['failed']}")
    for r in d.get("runs", []):
        if r.get("failed"):
            print(f"{name} {r['run']}: FAILED in {r.get('failed_in_stage')}: {r['failed']}")
            continue
        stages = ", ".join(f"{k} {v['seconds']:.1f} s {v['tokens']} tok {v['tokens_per_s']} tok/s "
                           f"{v['sequential_calls']} calls" for k, v in r["mllm_stages"].items())
        print(f"{name} {r['run']} (cap {d.get('memory_cap_gib', '-')} GiB): total {r['seconds']['total']:.1f} s, "
              f"edit {r['seconds'].get('edit', 0):.1f} s, peak {r['memory_peak_gib']:.1f} GiB; {stages}")
PYEOF
exit 0
