# Sourced by run.sh and test.sh: make sure .venv exists and holds this checkout's dependencies.
# torch and torchvision are resolved together in ONE pip command so they stay a matching pair
# (an unpinned torchvision pulled in later can otherwise drag in a different torch).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "NEMO Desktop needs Python 3.11 or newer (found: $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "Creating the virtual environment in .venv ..." >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.nemo-installed
extras=${NEMO_EXTRAS:-gui,test,docs}  # docs: tests/test_docs.py builds the documentation site
# What was installed: the extras, the torch route asked for (NEMO_TORCH: auto, cpu or default) and the editable
# mode; a change of any of them installs again.
want="$extras torch=${NEMO_TORCH:-auto} editable=compat"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "Installing NEMO Desktop and its dependencies (first run: several minutes; about 6.8 GB with CUDA torch, \
less with NEMO_TORCH=cpu) ..." >&2
  .venv/bin/python -m pip install -q --upgrade pip
  # scripts/install_plan.py: the pip commands, one a line, tab-separated (the CPU-only torch first where chosen)
  plan=$("$PY" scripts/install_plan.py --extras "$extras")
  while IFS=$'\t' read -r -a command; do
    if [ "${#command[@]}" -gt 0 ]; then .venv/bin/python -m pip "${command[@]}"; fi
  done <<< "$plan"
  echo "$want" > "$stamp"
fi
