"""`nemo predict IMAGE... --classifier ID_OR_SPEC [--top-k N] [--json]`: a classifier's top-k classes.

ID_OR_SPEC is a catalog id (`vit-b16-augreg2`, `clip-vit-b32`, ...) or `<family>:<source>`, e.g.
`timm:local-dir:/models/mine`, `timm:checkpoint:resnet50:/data/ft.safetensors --classes classes.txt`,
`hf-clip:/models/clip-folder`, `open_clip:ViT-B-32@laion2b_s34b_b79k`.
`fiftyone:NAME[#FIELD]` among the images stands for the images of that FiftyOne dataset that have a label in its
ground-truth field (the dataset source of core/data/sources.py).
An unreadable image (damaged, missing, a FIFO, a dangling link, no read permission, ...) is reported and skipped
(exit status 1, partial); the others are still classified. When no image can be read, nothing completed: exit
status 3, each file's error reported once (the scheme of every batch command, cli/exit_codes.py). A bar on
stderr (terminals only) shows the images read and classified.
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
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files, or fiftyone:NAME for a FiftyOne "
                   "dataset's images")
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

    from ...core.base.errors import ConfigError
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


READING, CLASSIFYING = "Reading images", "Classifying"


def expand_sources(images: list[str]) -> list[str]:
    """The image files, with each `fiftyone:NAME` replaced by its dataset's images (in the dataset's order)."""
    from ...core.data.sources import is_fiftyone_ref, open_source

    out: list[str] = []
    for image in images:
        out += [str(p) for p in open_source(image).paths] if is_fiftyone_ref(image) else [image]
    return out


def _report_unreadable(failures) -> None:
    for _, exc in failures:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)


def _classify(classifier, images, ctx):
    """Probabilities and unit embeddings in one forward pass per chunk of the classifier's batch size, so the bar
    moves and Ctrl-C stops between chunks."""
    import numpy as np

    from ...core.models.outputs import predict_with_embeddings

    step = max(1, int(getattr(classifier, "batch_size", 32) or 32))
    probs, embeddings, done = [], [], 0
    ctx.progress(CLASSIFYING, 0, len(images))
    for start in range(0, len(images), step):
        ctx.check_cancelled()
        p, e = predict_with_embeddings(classifier, images[start:start + step])
        probs.append(p)
        embeddings.append(e)
        done += len(p)
        ctx.progress(CLASSIFYING, done, len(images))
    return np.concatenate(probs, axis=0), np.concatenate(embeddings, axis=0)


def run(args) -> int:
    import numpy as np

    from ...core.base.errors import ConfigError, InputImageError
    from ...core.base.images import load_image
    from ...core.models.families import LoadOptions, load_model
    from ..exit_codes import RUNTIME, for_counts
    from ..progress import StageBars, cancellable_job

    if args.top_k < 1:
        raise ConfigError("--top-k must be at least 1.")
    loaded, failures = [], []
    bars = StageBars(kept={CLASSIFYING}, units={READING: "img", CLASSIFYING: "img"}, terminal_only=True)
    with cancellable_job(bars, cancels_after="the current batch") as ctx:
        for path in ctx.track(expand_sources(args.images), READING):
            try:
                loaded.append((path, load_image(path)))
            except InputImageError as exc:
                failures.append((path, exc))
        if not loaded:  # nothing completed: a runtime error (3), like index and bench run with no item done
            if len(failures) == 1:
                error = failures[0][1]  # printed once, by the command line's error handler
            else:
                _report_unreadable(failures)
                error = InputImageError(f"None of the {len(failures)} images could be read.",
                                        hint="See the errors above for each file.")
            error.exit_code = RUNTIME  # type: ignore[attr-defined]
            raise error
        classifier = load_model(_spec(args), LoadOptions(device=args.device, dtype=args.dtype))
        probs, embeddings = _classify(classifier, [img for _, img in loaded], ctx)
    _report_unreadable(failures)
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
