"""`nemo doctor [--json]`: what this installation looks like, for users and for bug reports.

It also checks that the files the program reads at run time (resources, report fonts, prompt templates) are
present and readable; a missing one makes the exit code 3 (a broken installation) and is listed first. It lists
the optional capabilities (pip extras, core/base/extras.py): which are installed, what each enables, how to add one."""
from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
import shutil
import sys

from ... import __version__

KEY_PACKAGES = ("torch", "torchvision", "transformers", "diffusers", "accelerate", "timm", "open_clip_torch",
                "huggingface_hub", "safetensors", "numpy", "pillow", "platformdirs", "PySide6-Essentials",
                "PySide6")


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _torch_facts() -> dict:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - report any import failure as a fact, not a crash
        return {"installed": False, "error": f"{type(exc).__name__}: {exc}"}
    from ...core.base.device import gpu_info

    return {"installed": True, "version": torch.__version__, "cuda_build": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "gpus": gpu_info()}


def _hf_facts(paths) -> dict:
    from huggingface_hub import constants

    try:
        from huggingface_hub import get_token

        has_token = get_token() is not None
    except Exception:  # noqa: BLE001 - an unreadable token file just means "not configured"
        has_token = False
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    return {"token_configured": has_token,  # never the value
            "offline_mode": offline or bool(getattr(constants, "HF_HUB_OFFLINE", False)),
            "hf_home": constants.HF_HOME, "hub_cache": paths.hf_cache_dir() or constants.HF_HUB_CACHE,
            "endpoint_overridden": "HF_ENDPOINT" in os.environ}


def _disk(path) -> dict:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return {"path": str(path), "free_bytes": usage.free, "total_bytes": usage.total}


def _files_check() -> list[dict]:
    """Shipped resources (the package's or checkout's resources/, or NEMO_RESOURCES), each prompt template, the
    report fonts."""
    from ...core.base.resource_check import check_resources

    rows = check_resources()
    try:
        from ...core.methods.prompts import available_prompts, load_prompt

        for name in available_prompts():
            try:
                load_prompt(name)
                rows.append({"resource": f"prompt {name}", "path": None, "ok": True, "problem": None})
            except Exception as exc:  # noqa: BLE001 - every unreadable prompt is a finding, not a crash
                rows.append({"resource": f"prompt {name}", "path": None, "ok": False, "problem": str(exc)})
    except Exception as exc:  # noqa: BLE001
        rows.append({"resource": "prompts", "path": None, "ok": False, "problem": str(exc)})
    from ...core.reports.fonts import FONT_DIR

    for font in ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"):
        path = FONT_DIR / font
        try:
            path.open("rb").close()
            rows.append({"resource": f"font {font}", "path": str(path), "ok": True, "problem": None})
        except OSError as exc:
            rows.append({"resource": f"font {font}", "path": str(path), "ok": False,
                         "problem": exc.strerror or str(exc)})
    return rows


def _metric_weights() -> dict:
    """Managed weights of metrics (LPIPS' AlexNet trunk for the competency analyses): present or not."""
    try:
        from ...core.analyses.competency.lpips_distance import trunk_status
    except Exception as exc:  # noqa: BLE001 - torch missing: reported under "torch" already
        return {"error": f"{type(exc).__name__}: {exc}"}
    from ...core.analyses.competency.metrics import inception_path

    inception = inception_path()
    return {"lpips-alex": trunk_status("alex"),
            "fid-inception": {"metric": "fid-inception", "path": str(inception), "present": inception.is_file()}}


def _extras() -> list[dict]:
    from ...core.base.extras import status

    return status()


def path_note() -> str | None:
    """Which setting names the data root when several are set: NEMO_HOME wins over NEMO_PORTABLE."""
    from ...core.store.paths import _FALSE

    home, portable = os.environ.get("NEMO_HOME"), os.environ.get("NEMO_PORTABLE", "")
    if home and portable.strip().lower() not in _FALSE:
        return (f"NEMO_HOME ({home}) and NEMO_PORTABLE ({portable}) are both set: NEMO_HOME wins, so the data "
                "is under NEMO_HOME and the weights in the standard Hugging Face cache; unset NEMO_HOME for "
                "portable mode.")
    return None


def collect() -> dict:
    from ...core.store.paths import get_paths

    paths = get_paths()
    facts = {
        "nemo_desktop": __version__,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": platform.platform(),
        "torch": _torch_facts(),
        "paths": paths.as_dict() | {"portable": paths.portable, "nemo_home_env": os.environ.get("NEMO_HOME"),
                                    "nemo_portable_env": os.environ.get("NEMO_PORTABLE")},
        "path_note": path_note(),
        "disk": {"store": _disk(paths.store_dir), "weights": _disk(paths.weights_dir)},
        "huggingface": _hf_facts(paths),
        "packages": {name: _version(name) for name in KEY_PACKAGES},
        "files": _files_check(),
        "metric_weights": _metric_weights(),
        "plugins": _plugins(),
        "extras": _extras(),
    }
    facts["memory_profile"] = _profile(facts["torch"])
    facts["files_ok"] = all(r["ok"] for r in facts["files"])
    facts["disk"]["hub_cache"] = _disk(__import__("pathlib").Path(facts["huggingface"]["hub_cache"]))
    return facts


def _profile(torch_facts: dict) -> dict:
    """The memory profile that fits the first GPU (core/models/profiles.py), and why."""
    from ...core.models.profiles import fitting_profile

    gpus = torch_facts.get("gpus") or []
    profile, why = fitting_profile(gpus[0]["total_bytes"] if gpus else None)
    return {"name": profile.name, "why": why, "summary": profile.summary}


def _plugins() -> list[dict]:
    """Every plugin entry point (core/base/plugins.py), loaded or skipped with why; the registries load them."""
    from ...core.models.families import list_families
    from ...core.base.plugins import list_plugins
    from ...core.registry import list_analyses

    list_families(), list_analyses()
    return [p.to_dict() for p in list_plugins()]


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def print_human(f: dict) -> None:
    print(f"NEMO Desktop {f['nemo_desktop']}  (Python {f['python']['version']}, {f['platform']})")
    bad = [r for r in f["files"] if not r["ok"]]
    if bad:
        print("PROBLEM: shipped files missing or unreadable (reinstall NEMO Desktop):")
        for r in bad:
            print(f"  {r['resource']}: {r['problem']}" + (f" ({r['path']})" if r["path"] else ""))
    else:
        print(f"files: {len(f['files'])} shipped resources, prompts and fonts present and readable")
    t = f["torch"]
    if not t["installed"]:
        print(f"torch: NOT importable ({t['error']})")
    else:
        print(f"torch {t['version']} (CUDA build: {t['cuda_build'] or 'none, CPU only'})")
        if t["gpus"]:
            for g in t["gpus"]:
                print(f"  GPU {g['index']}: {g['name']}, {_gib(g['total_bytes'])} total, {_gib(g['free_bytes'])} free")
        else:
            print("  no CUDA GPU available: models run on the CPU (slow)")
    p = f.get("memory_profile")
    if p:
        print(f"memory profile: '{p['name']}' fits ({p['why']}): {p['summary']}; choose it with --profile")
    if f.get("path_note"):
        print(f"note: {f['path_note']}")
    print("paths:")
    for k, v in f["paths"].items():
        print(f"  {k:14s} {v}")
    for k, d in f["disk"].items():
        print(f"disk ({k}): {_gib(d['free_bytes'])} free of {_gib(d['total_bytes'])} at {d['path']}")
    h = f["huggingface"]
    print(f"Hugging Face: token {'configured' if h['token_configured'] else 'not configured'}; offline mode "
          f"{'ON' if h['offline_mode'] else 'off'}; hub cache {h['hub_cache']}")
    print("packages: " + ", ".join(f"{k} {v}" for k, v in f["packages"].items() if v))
    for p in f.get("plugins", []):
        where = f" from {p['distribution']}" if p["distribution"] else ""
        state = f"adds {', '.join(p['registered']) or 'nothing'}" if p["ok"] else f"SKIPPED: {p['error']}"
        print(f"plugin {p['name']}{where} ({p['group']}): {state}")
    for e in f["extras"]:
        if e["installed"]:
            print(f"extra {e['extra']}: installed ({e['enables']})")
        else:
            print(f"extra {e['extra']}: NOT installed: {e['enables']} need it; without it {e['without']}. "
                  f"Add it: {e['install']}")
    for name, w in f["metric_weights"].items():
        if isinstance(w, dict) and "present" in w:
            print(f"metric weights {name}: " + ("present" if w["present"] else
                                                "MISSING (the metric is reported as unavailable)") +
                  f" at {w['path']}")


def run(args) -> int:
    facts = collect()
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        print_human(facts)
    from ..exit_codes import RUNTIME, SUCCESS

    return SUCCESS if facts["files_ok"] else RUNTIME


def register(sub) -> None:
    p = sub.add_parser("doctor", help="report Python, torch/CUDA, GPU, paths, disk, Hugging Face settings")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=run)
