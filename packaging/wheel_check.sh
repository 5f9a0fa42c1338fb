#!/usr/bin/env bash
# Release check (CI runs it after the test suite): build the wheel from a clean copy of the source, check that it
# holds exactly the source's files, install it NON-editable into a FRESH virtual environment WITH its declared
# dependencies (resolved by pip from the package index: the core install, no extras), and run the installed `nemo`
# from outside the checkout: --version, doctor --json (shipped files present, extras reported missing), models list
# --json (the catalog ships), predict on a tiny local timm model, a capability whose extra is missing refused
# before any work (exit 2, naming the extra), portable mode refusing to write into site-packages, and the desktop
# entry it installs. Then every extra is resolved as well (`pip install --dry-run 'WHEEL[all]'`, metadata only),
# and the core install's size is printed.
#
# pip's downloads are cached in NEMO_CI_PIP_CACHE (default ~/.cache/nemo-ci/pip), so only the first run downloads
# (torch with its CUDA libraries: ~3 GB); later runs install from the cache (~2-3 min, most of it unpacking torch).
# NEMO_CI_PYTHON: the interpreter that builds the wheel and makes the venv (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$PWD
PY=${NEMO_CI_PYTHON:-$CHECKOUT/.venv/bin/python}
export PIP_CACHE_DIR=${NEMO_CI_PIP_CACHE:-$HOME/.cache/nemo-ci/pip}
unset PIP_NO_CACHE_DIR
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Built from the files git knows (tracked, or new and not ignored): no build/, *.egg-info or models_cache/ contents;
# setuptools reuses a checkout's build/lib and would ship modules deleted or moved since (seen: a stale
# core/methods/global_explanation.py in a wheel of this checkout).
mkdir -p "$WORK/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -f "$f" ] && printf '%s\0' "$f"; done | tar -cf - --null -T - | tar -xf - -C "$WORK/src"
"$PY" -m pip wheel -q --no-deps --no-build-isolation "$WORK/src" -w "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/nemo_desktop-*.whl)
# Every file of the wheel comes from the source (setup.py maps resources/ and packaging/desktop|icons/ into
# nemo_desktop/resources/), and every resource is in the wheel.
"$PY" - "$WHEEL" <<'PY'
import pathlib, sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("nemo_desktop/")]
def source(n):
    for prefix, folder in (("nemo_desktop/resources/desktop/", "packaging/desktop/"),
                           ("nemo_desktop/resources/icons/", "packaging/icons/"),
                           ("nemo_desktop/resources/", "resources/")):
        if n.startswith(prefix):
            return pathlib.Path(folder + n[len(prefix):])
    return pathlib.Path(n)
stale = [n for n in names if not source(n).exists()]
assert not stale, f"the wheel holds files the source tree does not: {stale}"
shipped = {source(n) for n in names}
missing = [str(p) for d in ("resources", "packaging/desktop", "packaging/icons") for p in pathlib.Path(d).rglob("*")
           if p.is_file() and "__pycache__" not in p.parts and p not in shipped]
assert not missing, f"resources missing from the wheel: {missing}"
print(f"wheel: {len(names)} files of the package, {len(shipped & {source(n) for n in names if '/resources/' in n})} "
      "resources, nothing stale")
PY
"$PY" -m venv "$WORK/venv"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
start=$(date +%s)
"$WORK/venv/bin/python" -m pip install -q "$WHEEL"  # the declared dependencies, resolved from the index
echo "fresh install of the wheel and its dependencies: $(( $(date +%s) - start )) s (pip cache: $PIP_CACHE_DIR)"
"$WORK/venv/bin/python" -m pip check

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
# The core install has no extra; doctor says so, and a capability that needs one is refused before any work.
"$VPY" -c 'import json; e = {r["extra"]: r for r in json.load(open("doctor.json"))["extras"]}; assert {"editing", "competency", "pdf", "tokens"} <= set(e) and not any(r["installed"] for r in e.values()), e; print("doctor: extras not installed:", ", ".join(e))'
"$NEMO" doctor > doctor.txt  # to a file: `| grep -q` would close the pipe early, and nemo then exits 141
grep -q "extra pdf: NOT installed" doctor.txt
set +e
"$NEMO" report nothing-stored -o report.pdf --json > pdf.json
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "nemo report -o x.pdf without the pdf extra: expected exit 2, got $rc"; exit 1; }
"$VPY" -c 'import json; e = json.load(open("pdf.json"))["error"]; assert "pdf" in e["message"] and "nemo-desktop[pdf]" in e["hint"], e; print("pdf report without the extra: refused (exit 2):", e["message"])'
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

# Every extra resolves too (metadata only: nothing is installed), and the size of the core install.
"$VPY" -m pip install -q --dry-run --ignore-installed --report "$WORK/all.json" "$WHEEL[all]"
"$VPY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["install"]; print("extras: nemo-desktop[all] resolves to %d distributions" % len(r))' "$WORK/all.json"
"$VPY" - "$SITE" <<'PY'
import importlib.metadata as md, os, re, sys
from pip._vendor.packaging.requirements import Requirement
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
dists = {norm(d.metadata["Name"]): d for d in md.distributions(path=[sys.argv[1]])}
size = {n: sum(os.path.getsize(d.locate_file(f)) for f in d.files or [] if os.path.exists(d.locate_file(f)))
        for n, d in dists.items()}
def closure(roots):
    """Every distribution the roots pull in, following requested extras (torch's cuda-toolkit[cufft,...])."""
    seen, todo = set(), [(n, "") for n in roots]
    while todo:
        n, extra = todo.pop()
        if (n, extra) in seen or n not in dists:
            continue
        seen.add((n, extra))
        for r in map(Requirement, dists[n].requires or []):
            if not r.marker or r.marker.evaluate({"extra": extra}):
                todo += [(norm(r.name), e) for e in ("", *r.extras)]
    return {n for n, _ in seen}
torch = closure(["torch", "torchvision"])
mib = lambda names: sum(size[n] for n in names) / 2**20
rest = sorted(set(dists) - torch, key=lambda n: -size[n])
print(f"core install: {len(dists)} distributions, {mib(dists):.0f} MiB of site-packages; without torch, torchvision "
      f"and what only they pull in (CUDA libraries, triton, ...): {len(rest)} distributions, {mib(rest):.0f} MiB "
      f"(largest: {', '.join(f'{n} {size[n] / 2**20:.0f}' for n in rest[:6])})")
PY
echo "wheel install check: OK"
