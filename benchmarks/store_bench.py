"""Results-store throughput: small puts/gets, and puts carrying a 512x512 PNG artifact.

usage: python benchmarks/store_bench.py [--n 2000] [--n-images 100] [--dir DIR]
Runs in a temporary directory (or DIR) on the disk that holds it; prints one line per figure.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from nemo_desktop.core.store import ResultsStore, result_key


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:10.0f} ops/s  ({seconds / n * 1e3:7.3f} ms/op, n={n})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="small results to put/get")
    ap.add_argument("--n-images", type=int, default=100, help="results with a 512x512 PNG")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = ResultsStore.open(db_path=Path(tmp) / "results.sqlite")
        keys = [result_key("caption", image_sha256=f"{i:064x}", mllm="m", prompt_version="p/1") for i in range(args.n)]
        payload = {"text": "a photo of a dog on a sandy beach, seen from the side", "prob": 0.4321, "tokens": 17}

        t = time.perf_counter()
        for k in keys:
            store.put(k, "caption", payload)
        print(f"put small payload (one transaction each): {rate(args.n, time.perf_counter() - t)}")

        t = time.perf_counter()
        for k in keys:
            assert store.get(k) is not None
        print(f"get small payload:                         {rate(args.n, time.perf_counter() - t)}")

        t = time.perf_counter()
        for k in keys[:200]:
            assert store.has(k)
        print(f"has:                                       {rate(200, time.perf_counter() - t)}")

        t = time.perf_counter()
        found = store.find("caption", limit=100, tokens=17)
        print(f"find(kind, limit=100, payload field):      {(time.perf_counter() - t) * 1e3:7.2f} ms "
              f"over {args.n} rows ({len(found)} returned)")

        rng = np.random.default_rng(0)
        base = rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)
        # Smooth-ish image content (random noise would be a worst case for PNG): gradient + noise.
        yy, xx = np.mgrid[0:512, 0:512]
        images = []
        for i in range(args.n_images):
            arr = ((xx + yy + i * 7) % 256)[..., None].astype(np.uint8).repeat(3, axis=2)
            arr[::8, ::8] = base[::8, ::8]
            images.append(Image.fromarray(arr))
        t = time.perf_counter()
        sizes = []
        for i, im in enumerate(images):
            r = store.put(result_key("edit", i=i), "edit", {"i": i}, {"edited": im})
            sizes.append(r.artifacts["edited"].stat().st_size)
        dt = time.perf_counter() - t
        print(f"put with 512x512 PNG (new file each):      {rate(args.n_images, dt)}  "
              f"PNG ~{np.mean(sizes) / 1024:.0f} KiB")

        t = time.perf_counter()
        for i, im in enumerate(images[:50]):
            store.put(result_key("edit-again", i=i), "edit", {"i": i}, {"edited": im})
        print(f"put with 512x512 PNG (dedup, file exists): {rate(50, time.perf_counter() - t)}")

        t = time.perf_counter()
        for i in range(min(50, args.n_images)):
            store.get(result_key("edit", i=i)).load_image("edited")
        print(f"get + decode 512x512 PNG:                  {rate(min(50, args.n_images), time.perf_counter() - t)}")

        buf_t = time.perf_counter()
        feats = rng.standard_normal((20000, 768)).astype(np.float32)
        store.save_array("bench-features", feats)
        save_s = time.perf_counter() - buf_t
        t = time.perf_counter()
        m = store.open_array("bench-features")
        _ = m[12345].sum()
        print(f"save_array 20000x768 float32 ({feats.nbytes / 2**20:.0f} MiB): {save_s * 1e3:7.1f} ms; "
              f"open_array (mmap) + one row: {(time.perf_counter() - t) * 1e3:6.2f} ms")

        t = time.perf_counter()
        problems = store.check()
        info = store.info()
        print(f"check() over {info['results']} rows / {info['artifact_files']} files: "
              f"{(time.perf_counter() - t) * 1e3:7.1f} ms, problems={len(problems)}")
        print(f"database size: {info['database_bytes'] / 2**20:.2f} MiB, artifacts: "
              f"{info['artifact_bytes'] / 2**20:.1f} MiB")
        store.close()


if __name__ == "__main__":
    main()
