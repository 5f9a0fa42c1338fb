"""`nemo predict IMAGE... --classifier ID_OR_SPEC [--top-k N] [--json]`: a classifier's top-k classes.

ID_OR_SPEC is a catalog id (`vit-b16-augreg2`, `clip-vit-b32`, ...) or `<family>:<source>`, e.g.
`timm:local-dir:/models/mine`, `timm:checkpoint:resnet50:/data/ft.safetensors --classes classes.txt`,
`hf-clip:/models/clip-folder`, `open_clip:ViT-B-32@laion2b_s34b_b79k`.
An unreadable image (damaged, a FIFO, a dangling link, no read permission, ...) is reported and skipped (exit
status 1, partial); the others are still classified.
"""
from __future__ import annotations

import json
import sys

DEFAULT_CLASSIFIER = "vit-b16-augreg2"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="classify images with a classifier (top-k classes)",
        description="Classify images and print each one's top-k classes. ID_OR_SPEC is a catalog id "
                    "(`nemo models list`) or <family>:<source>, e.g. timm:local-dir:/models/mine, "
                    "timm:checkpoint:resnet50:/data/ft.safetensors (with --classes), hf-clip:/models/clip, "
                    "open_clip:ViT-B-32@laion2b_s34b_b79k.")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files")
    p.add_argument("--classifier", "-c", default=DEFAULT_CLASSIFIER, metavar="ID_OR_SPEC",
                   help=f"catalog id or <family>:<source> (default: {DEFAULT_CLASSIFIER})")
    p.add_argument("--top-k", "-k", type=int, default=5, metavar="N", help="classes to show per image (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--embeddings", action="store_true",
                   help="with --json: add each image's L2-normalised embedding (from the same forward pass)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    p.add_argument("--classes", metavar="FILE", help="class-name file (one per line) for the classifier's outputs")
    p.add_argument("--vocabulary", metavar="NAME",
                   help="class vocabulary for zero-shot classifiers: imagenet-1k (default), imagenet-r, "
                        "objectnet, imagenet-d")
    p.add_argument("--batch-size", type=int, default=None, metavar="N", help="images per forward pass")
    p.set_defaults(func=run)


def _spec(args):
    from dataclasses import replace

    from ...core.errors import ConfigError
    from ...core.models.catalog import resolve_model_ref

    spec = resolve_model_ref(args.classifier, "classifier")
    options = dict(spec.options)
    if args.classes:
        options["class_file"] = args.classes
    if args.vocabulary:
        options["vocabulary"] = args.vocabulary
    if args.batch_size is not None:
        if args.batch_size < 1:
            raise ConfigError("--batch-size must be at least 1.")
        options["batch_size"] = args.batch_size
    return replace(spec, options=options)


def run(args) -> int:
    import numpy as np

    from ...core.errors import ConfigError, InputImageError
    from ...core.images import load_image
    from ...core.models.outputs import predict_with_embeddings
    from ...core.models.registry import LoadOptions, load_model
    from ..exit_codes import for_counts

    if args.top_k < 1:
        raise ConfigError("--top-k must be at least 1.")
    loaded, failures = [], []
    for path in args.images:
        try:
            loaded.append((path, load_image(path)))
        except InputImageError as exc:
            failures.append((path, exc))
            print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
    if not loaded:
        raise failures[0][1]
    classifier = load_model(_spec(args), LoadOptions(device=args.device, dtype=args.dtype))
    probs, embeddings = predict_with_embeddings(classifier, [img for _, img in loaded])  # one forward pass
    k = min(args.top_k, probs.shape[1])
    results = []
    for (path, _), row, emb in zip(loaded, probs, embeddings):
        top = np.argsort(-row, kind="stable")[:k]
        results.append({"image": path, "top_k": [{"rank": r + 1, "index": int(i), "name": classifier.class_names[i],
                                                  "probability": float(row[i])} for r, i in enumerate(top)]})
        if args.embeddings:
            results[-1]["embedding"] = [round(float(v), 7) for v in emb]
    results += [{"image": path, "error": exc.to_dict()} for path, exc in failures]
    info = classifier.info
    if args.json:
        print(json.dumps({"classifier": {"model_id": info.model_id, "family": info.family,
                                         "revision": info.revision, "num_classes": len(classifier.class_names)},
                          "results": results}, indent=2))
    else:
        print(f"{info.model_id} ({info.family}, {len(classifier.class_names)} classes, "
              f"revision {info.revision or 'unknown'})")
        for res in results:
            if "top_k" not in res:
                continue
            print(f"\n{res['image']}")
            width = max(len(t["name"]) for t in res["top_k"])
            for t in res["top_k"]:
                print(f"  {t['rank']:>2}. {t['name']:<{width}}  {t['probability']:7.2%}  (class {t['index']})")
    return for_counts(len(loaded), len(failures))
