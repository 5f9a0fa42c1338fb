"""Listing the analysis registry: what the Analyses page (and `nemo --help`) costs before its first paint.

Each run is a fresh Python process (so no import is already cached) that does one of:

- listing: `list_analyses()` and, for every entry, its settings form (config_params) and inputs, as the page does;
- eager:   the same, then every analysis' factory loaded (every pipeline module imported, torch and scipy with
           competency's), which is what listing cost while the competency modules imported them at module level.

    .venv/bin/python benchmarks/registry_listing.py [--runs 3]

Prints the median seconds of each, the ratio eager / listing and the heavy modules each had imported.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "scipy", "torchmetrics", "lpips", "transformers", "diffusers", "sklearn")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from nemo_desktop.core.registry import config_params, get_analysis, list_analyses
from nemo_desktop.core.registry.spec import LazyFactory
specs = [get_analysis(n) for n in list_analyses()]
forms = [([p.name for p in config_params(s.config)] if s.config else [], s.inputs.used()) for s in specs]
if sys.argv[1] == "eager":
    for s in specs:
        if isinstance(s.factory, LazyFactory):
            s.factory.load()
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "n": len(specs), "heavy": [m for m in %r if m in sys.modules]}))
"""


def one(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD % (HEAVY,), mode], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[dict]] = {"listing": [], "eager": []}
    started = time.perf_counter()
    for _ in range(args.runs):  # interleaved, so a change in the machine's load hits both alike
        for mode in results:
            results[mode].append(one(mode))
    med = {m: statistics.median(r["seconds"] for r in rs) for m, rs in results.items()}
    for mode, rs in results.items():
        each = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        print(f"{mode:8s} median {med[mode]:.2f} s over {len(rs)} fresh processes ({each}); {rs[0]['n']} analyses; "
              f"heavy modules imported: {', '.join(rs[0]['heavy']) or 'none'}")
    print(f"ratio eager / listing: {med['eager'] / med['listing']:.1f}x   (benchmark took "
          f"{time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
