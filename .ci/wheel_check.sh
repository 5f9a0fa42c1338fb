#!/usr/bin/env bash
# CI step: build the wheel, install it NON-editable into a fresh virtual environment, and run the installed `nemo`
# from outside the checkout: --version, doctor --json (shipped files present), models list --json (the catalog
# ships), predict on a tiny local timm model (the CLI and the Python API), `nemo mcp --help`, portable mode refusing to write into site-packages, and the
# desktop entry it installs.
# The fresh venv reuses the dependencies already in .venv (a path line, so .venv's editable install of this
# checkout is NOT picked up: .pth files of a plain path entry are not executed), which keeps the step to ~1 min.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$PWD
PY=${NEMO_CI_PYTHON:-$CHECKOUT/.venv/bin/python}  # the interpreter whose packages are reused
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Built from a copy without build/ and *.egg-info: setuptools reuses a checkout's build/lib and would ship modules
# deleted or moved since (seen: a stale core/methods/global_explanation.py in a wheel of this checkout).
"$PY" -c 'import shutil, sys; shutil.copytree(".", sys.argv[1], ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "models_cache"))' "$WORK/src"
"$PY" -m pip wheel -q --no-deps --no-build-isolation "$WORK/src" -w "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/nemo_desktop-*.whl)
"$PY" - "$WHEEL" <<'PY'
import pathlib, sys, zipfile
stale = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("nemo_desktop/") and not pathlib.Path(n).exists()]
assert not stale, f"the wheel holds files the source tree does not: {stale}"
PY
"$PY" -m venv "$WORK/venv"
DEPS=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$DEPS" > "$SITE/_nemo_ci_reuse_deps.pth"
"$WORK/venv/bin/python" -m pip install -q --no-deps --no-index "$WHEEL"

cd "$WORK"  # nothing of the checkout is importable from here
unset PYTHONPATH NEMO_RESOURCES NEMO_PORTABLE
export NEMO_HOME=$WORK/home HF_HUB_OFFLINE=1 HF_HOME=$WORK/hf
NEMO=$WORK/venv/bin/nemo
VPY=$WORK/venv/bin/python

"$VPY" - "$SITE" <<'PY'
import sys, nemo_desktop
where = nemo_desktop.__file__
assert where.startswith(sys.argv[1]), f"nemo_desktop imported from {where}, not from the installed wheel"
print("installed copy:", where)
PY
"$NEMO" --version
"$NEMO" doctor --json > doctor.json
"$VPY" -c 'import json; f = json.load(open("doctor.json")); bad = [r for r in f["files"] if not r["ok"]]; assert f["files_ok"] and not bad, bad; print("doctor: %d shipped files OK" % len(f["files"]))'
"$NEMO" models list --json > models.json
"$VPY" -c 'import json; m = json.load(open("models.json"))["models"]; assert len(m) >= 5; print("models list: %d catalog entries" % len(m))'

# A tiny random timm classifier saved like a real checkpoint, and two images.
"$VPY" - <<'PY'
import numpy as np, timm, torch
from PIL import Image
torch.manual_seed(0)
model = timm.create_model("test_resnet", pretrained=False, num_classes=3)
timm.models.save_for_hf(model, "tiny-model", model_config={"label_names": ["cat", "dog", "fox"]},
                        data_config={"input_size": (3, 64, 64), "crop_pct": 1.0}, safe_serialization=True)
for i in range(2):
    Image.fromarray(np.random.default_rng(i).integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(f"img{i}.png")
PY
"$NEMO" predict img0.png img1.png -c "timm:local-dir:$WORK/tiny-model" --device cpu -k 2 --json > predict.json
"$VPY" -c 'import json; r = json.load(open("predict.json"))["results"]; assert len(r) == 2 and all(len(x["top_k"]) == 2 for x in r); print("predict:", [x["top_k"][0]["name"] for x in r])'
"$VPY" -m nemo_desktop.cli --version >/dev/null
# The Python API of the installed copy (typed: py.typed and the package stub ship), and the MCP server's command.
"$VPY" - "$SITE" "$WORK/tiny-model" <<'PY'
import pathlib, sys
import nemo_desktop as nemo
site = pathlib.Path(sys.argv[1]) / "nemo_desktop"
assert (site / "py.typed").is_file() and (site / "__init__.pyi").is_file(), "py.typed / __init__.pyi not shipped"
preds = nemo.predict(["img0.png"], f"timm:local-dir:{sys.argv[2]}", top_k=2, device="cpu", progress=False)
assert len(preds[0]["top_k"]) == 2, preds
print("python api: predict", preds[0]["top_k"][0]["name"])
PY
"$NEMO" mcp --help > /dev/null

# Portable mode of an installed copy: a clear error (exit 3), and nothing written into site-packages.
set +e
env -u NEMO_HOME "$NEMO" --portable doctor --json > portable.json  # NEMO_HOME would take precedence
rc=$?
set -e
[ "$rc" -eq 3 ] || { echo "nemo --portable: expected exit 3, got $rc"; exit 1; }
"$VPY" -c 'import json; e = json.load(open("portable.json"))["error"]; assert "installed copy" in e["message"], e; print("portable without a folder: refused (exit 3)")'
if find "$WORK/venv" -name models_cache | grep -q .; then echo "portable mode wrote into the venv"; exit 1; fi
env -u NEMO_HOME "$NEMO" --portable-dir "$WORK/portable" doctor --json > /dev/null && [ -d "$WORK/portable/nemo_home" ]
# The menu entry of an installed copy names its own launcher and passes desktop-file-validate.
XDG_DATA_HOME=$WORK/share "$NEMO" desktop-entry --install --json > entry.json
"$VPY" - "$WORK/venv/bin/nemo-desktop" <<'PY'
import json, sys
e = json.load(open("entry.json"))
assert e["exec"] == sys.argv[1], e
assert f"Exec={sys.argv[1]}" in open(e["entry"]).read(), open(e["entry"]).read()
print("desktop entry:", e["entry"])
PY
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$WORK/share/applications/nemo-desktop.desktop"; fi
echo "wheel install check: OK"
