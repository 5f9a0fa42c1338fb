#!/usr/bin/env bash
# Are the dependency floors in pyproject.toml true? Resolve the LOWEST allowed version of every direct dependency
# (uv's --resolution lowest-direct; indirect ones stay at their newest), install that set into a throw-away
# virtual environment and run a fast subset of the tests against it: model adapters (torch, torchvision,
# transformers, diffusers, timm, open_clip), the CLI, reports and reply parsing, and one fast file per library
# added since (scipy, torchmetrics + torch-fidelity, lpips, bpe-openai, filelock, fonttools, ray).
#
# Not part of the default CI (.ci/run): it downloads a second PyTorch with its CUDA libraries (~3 GB) and takes
# 10 to 20 minutes (18 min with a warm uv cache on a loaded 2-core machine). Run it when changing a floor:
#     bash scripts/check_lowest_deps.sh [extra pytest args]
# NEMO_LOWEST_DIR=DIR keeps the environment in DIR between runs (default: a temporary folder, removed after).
# PYTHON=python3.12 runs it on another Python (3.11 is the oldest requires-python allows: transformers 5.23 needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -n "${NEMO_LOWEST_DIR:-}" ]; then WORK=$NEMO_LOWEST_DIR; mkdir -p "$WORK"; else
  WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT; fi

UV=$(command -v uv || true)
if [ -z "$UV" ]; then  # uv is a build tool here, not a dependency of the project: install it beside the venv
  "$PY" -m pip install -q --target "$WORK/uv" uv
  UV=$WORK/uv/bin/uv
fi
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$UV" pip compile pyproject.toml --extra test --extra gui --resolution lowest-direct --python-version "$PYVER" \
  --no-header -q -o "$WORK/lowest.txt"
echo "lowest direct versions:"; grep -E '^[a-z0-9_.-]+==' "$WORK/lowest.txt" | tr '\n' ' '; echo
[ -x "$WORK/venv/bin/python" ] || "$UV" venv -q --python "$PY" "$WORK/venv"
"$UV" pip install -q --python "$WORK/venv/bin/python" -r "$WORK/lowest.txt"
"$UV" pip install -q --python "$WORK/venv/bin/python" --no-deps -e .  # editable: the tests expect a checkout

# The checkout's own tests, against the installed lowest-version set (-p no:cacheprovider: nothing written here).
# SIGINT is reset first: a shell started in the background (`nohup ... &`) ignores it, and the Ctrl-C tests would fail.
cd tests && QT_QPA_PLATFORM=offscreen "$WORK/venv/bin/python" -c \
  'import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))' \
  -q -p no:cacheprovider --rootdir=.. -c ../pyproject.toml \
  core/models core/methods/test_parsing.py core/test_resources.py cli core/reports/test_report_cli.py \
  core/analyses/competency/test_parce.py core/analyses/competency/test_competency_metrics.py \
  core/analyses/competency/test_lpips_weights.py core/analyses/failure_modes/test_fm_clustering.py \
  core/analyses/model_diff/test_model_diff_metrics.py core/models/test_endpoint_limit.py \
  core/reports/test_report_pdf.py core/benchmark/test_bench_ray.py core/test_registry_listing.py "$@"
