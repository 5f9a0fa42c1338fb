"""`nemo explain IMAGE --true-label LABEL --classifier ID --mllm ID [--editor ID] --reference INDEX`: explain
why the classifier got IMAGE wrong (SciTX) and test each hypothesis by a counterfactual intervention.

--reference is a reference-index id (`nemo index --list`), a dataset folder / CSV manifest (indexed with the
classifier first, incrementally), or `none` (no observations). Every step is kept in the results store: a
re-run of the same image answers from it, and Ctrl-C stops after the current step (a re-run resumes).

--method picks the method: scitx (default) or one of the paper's baselines, error-retrieval, cam-mllm and
change-mllm; --validate gives a baseline SciTX's validation (M candidates, the one with the largest CEI;
Table 2), and is implied for scitx. A baseline without --validate is still scored with CEI when it can be
tested (a zero-shot classifier, or an --editor). cam-mllm needs no reference, change-mllm does, and
error-retrieval needs no MLLM unless its explanation is scored; for a classifier that is not zero-shot it
embeds in the space of --retrieval-model (default clip-vit-b32).
"""
from __future__ import annotations

import sys
from pathlib import Path


def register(subparsers) -> None:
    from ..output import add_output_options

    p = subparsers.add_parser("explain", help="explain a misclassified image (SciTX or a baseline) and test the explanation",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("image", metavar="IMAGE", help="the misclassified image")
    p.add_argument("--true-label", "-y", required=True, metavar="LABEL", help="its true class: name or index")
    p.add_argument("--classifier", "-c", required=True, metavar="ID", help="catalog id or <family>:<source>")
    p.add_argument("--mllm", "-l", metavar="ID",
                   help="multimodal LLM: catalog id or <family>:<source> (required, except for error-retrieval "
                        "without CEI)")
    p.add_argument("--editor", "-e", metavar="ID",
                   help="image editor for image interventions (default: the catalog's paper default; a baseline "
                        "without --validate uses one only when given, to score its explanation); not used for "
                        "zero-shot classifiers, whose hypotheses are tested by prompt rewriting")
    p.add_argument("--reference", "-r", metavar="INDEX_OR_DATASET",
                   help="reference index id, dataset folder or CSV manifest, or 'none' (required for scitx and "
                        "change-mllm)")
    p.add_argument("--method", default="scitx", metavar="NAME",
                   help="scitx (default), error-retrieval, cam-mllm or change-mllm (`-validated` variants too)")
    p.add_argument("--validate", action="store_true",
                   help="baselines: draw --m candidates and keep the one with the largest CEI (paper Table 2); "
                        "SciTX always does")
    p.add_argument("--retrieval-model", metavar="ID",
                   help="error-retrieval: CLIP-like model of the joint space (default: the classifier if it is "
                        "zero-shot, else clip-vit-b32)")
    p.add_argument("--corpus", action="append", default=[], metavar="FILE",
                   help="error-retrieval: extra error-sentence file (.json or .tsv; repeatable)")
    p.add_argument("--k", type=int, default=3, metavar="N", help="observations per set A/B/C (default 3)")
    p.add_argument("--m", type=int, default=3, metavar="N",
                   help="hypothesis candidates (default 3; baselines use them with --validate)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of sampling, retrieval and edits (0)")
    p.add_argument("--no-class-relevance", action="store_true",
                   help="retrieve by similarity only (the paper's Table 5 ablation)")
    p.add_argument("--edit-steps", type=int, metavar="N", help="diffusion steps of the editor (its default)")
    p.add_argument("--edit-guidance", type=float, metavar="G", help="guidance scale of the editor (its default)")
    p.add_argument("--edit-size", metavar="WxH", help="edit at this size instead of the image's own")
    p.add_argument("--max-new-tokens", type=int, metavar="N",
                   help="cap on every MLLM reply (default: 160 for captions, 512 for hypotheses, 256 for "
                        "interventions)")
    add_output_options(p, "the full result")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    p.set_defaults(func=run)


# -- loading ------------------------------------------------------------------------------------------------
def _parse_size(text: str | None):
    from ...core.errors import ConfigError

    if not text:
        return None
    try:
        w, h = (int(v) for v in text.lower().split("x"))
        if w > 0 and h > 0:
            return (w, h)
    except ValueError:
        pass
    raise ConfigError(f"--edit-size must look like 512x512, not '{text}'.")


def _default_editor_id() -> str:
    from ...core.models.catalog import list_catalog

    editors = list_catalog("editor")
    chosen = next((e for e in editors if e.paper_default), editors[0] if editors else None)
    if chosen is None:
        from ...core.errors import ConfigError

        raise ConfigError("No image editor is configured.", hint="Give one with --editor ID.")
    return chosen.id


def _load(ref: str, kind: str, args):
    from ...core.models.catalog import resolve_model_ref
    from ...core.models.registry import LoadOptions, load_model

    return load_model(resolve_model_ref(ref, kind), LoadOptions(device=args.device, dtype=args.dtype))


def _reference(ref: str, classifier, store, ctx):
    """An index id, a dataset (indexed now, incrementally) or 'none'."""
    if ref.lower() == "none":
        return None
    from ...core.data.reference_index import align_to_classifier, build_index, find_index

    path = Path(ref).expanduser()
    if path.exists():
        from ...core.data.datasets import open_dataset

        dataset = align_to_classifier(open_dataset(path), classifier, skip_unmatched=True)
        return build_index(dataset, classifier, store, ctx.sub("Reference index"))
    return find_index(store, ref)


def method_name(method: str, validate: bool) -> str:
    """The registry name for --method/--validate: a baseline's `-validated` variant; SciTX always validates."""
    from ...core.methods.registry import list_methods
    from ...core.methods.validation import VALIDATED_SUFFIX

    if not validate or method == "scitx" or method.endswith(VALIDATED_SUFFIX):
        return method
    if method + VALIDATED_SUFFIX not in list_methods():
        from ...core.errors import ConfigError

        raise ConfigError(f"The method '{method}' has no validated variant.",
                          hint=f"Known methods: {', '.join(list_methods())}.")
    return method + VALIDATED_SUFFIX


# -- output -------------------------------------------------------------------------------------------------
def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[:width - 1] + "…"


def format_result(result) -> str:
    s = result.sample
    lines = [f"Image:      {s.image_path or '(image)'}",
             f"Prediction: '{s.pred_name}' (p = {s.prob_pred:.3f}); true class '{s.true_name}' "
             f"(p = {s.prob_true:.3f})"]
    if result.method != "scitx":
        lines.append(f"Method:     {result.method}")
    lines.append("")
    if result.explanation is not None:
        score = f"CEI {result.cei:+.2f}" if result.cei is not None else "not scored with CEI"
        lines += [f"Explanation ({score}):", f"  {result.explanation}", ""]
    else:
        lines += ["No explanation could be validated (see the candidates below).", ""]
    lines.append("Candidates:")
    lines.append(f"  {'#':>2}  {'CEI':>8}  {'P(true) before -> after':<24}  hypothesis")
    for i, c in enumerate(result.candidates):
        mark = "*" if i == result.selected_index else " "
        score = f"{c.cei:+8.2f}" if c.cei is not None else f"{'-':>8}"
        probs = (f"{c.prob_true_before:.3f} -> {c.prob_true_after:.3f}" if c.prob_true_after is not None
                 else "")
        lines.append(f"{mark} {i + 1:>2}  {score}  {probs:<24}  {_short(c.hypothesis, 100) or '(none)'}")
        if c.intervention:
            what = "edit" if c.intervention_kind == "image" else "prompt"
            lines.append(f"  {'':>2}  {'':>8}  {'':<24}  {what}: {_short(c.intervention, 90)}")
        if c.top5_after:
            lines.append(f"  {'':>2}  {'':>8}  {'':<24}  top-1 after: '{c.top5_after[0].name}' "
                         f"({c.top5_after[0].prob:.3f})")
        if c.error:
            lines.append(f"  {'':>2}  {'':>8}  {'':<24}  error: {_short(c.error, 100)}")
    if result.evidence:
        lines += ["", "Evidence (artifacts of the stored result):"]
        lines += [f"  - {label}: {name}" for label, name in result.evidence.items()]
    if result.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in result.notes]
    if result.result_key:
        lines += ["", f"Stored in the results store as {result.result_key[:16]}."]
    return "\n".join(lines)


def run(args) -> int:
    from dataclasses import fields

    from ...core.errors import ConfigError, JobCancelled
    from ...core.methods.registry import get_method
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..output import emit
    from ..progress import StageBars, cancellable_job

    if args.k < 0 or args.m < 1:
        raise ConfigError("--k must be >= 0 and --m >= 1.")
    image = Path(args.image)
    if not image.is_file():
        raise ConfigError(f"No image file at {image}.", hint="Check the path.")
    entry = get_method(method_name(args.method, args.validate))
    needs_mllm = getattr(entry.factory, "needs_mllm", True)
    if args.mllm is None and (needs_mllm or entry.needs_editor):
        raise ConfigError(f"--mllm is required for the method {entry.name}.",
                          hint="Give a multimodal LLM: a catalog id (`nemo models list`) or <family>:<source>.")
    if args.reference is None and getattr(entry.factory, "needs_reference", entry.name == "scitx"):
        raise ConfigError(f"--reference is required for the method {entry.name}.",
                          hint="Give a reference dataset or index id" + (", or 'none' for no observations."
                                                                          if entry.name == "scitx" else "."))
    wanted = dict(k=args.k, m=args.m, seed=args.seed, class_relevance=not args.no_class_relevance,
                  edit_steps=args.edit_steps, edit_guidance=args.edit_guidance, edit_size=_parse_size(args.edit_size),
                  corpus_files=tuple(args.corpus))
    if args.max_new_tokens is not None:
        if args.max_new_tokens < 1:
            raise ConfigError("--max-new-tokens must be at least 1.")
        wanted.update(caption_max_new_tokens=args.max_new_tokens, hypothesis_max_new_tokens=args.max_new_tokens,
                      intervention_max_new_tokens=args.max_new_tokens)
    known = {f.name for f in fields(entry.config)} if entry.config else set()
    config = entry.config(**{k: v for k, v in wanted.items() if k in known}) if entry.config else None

    store = ResultsStore.open(get_paths().ensure())
    try:
        with cancellable_job(StageBars()) as ctx:
            classifier = _load(args.classifier, "classifier", args)
            label = args.true_label  # a class name first, else an index (resolve_label)
            from ...core.methods.labels import resolve_label

            resolve_label(label, classifier.class_names)  # a typo fails before the big models load
            zero_shot = bool(getattr(classifier, "zero_shot", False))
            editor = None
            if not zero_shot and (entry.needs_editor or args.editor):
                editor = _load(args.editor or _default_editor_id(), "editor", args)
            elif args.editor:
                print("note: the classifier is zero-shot; hypotheses are tested by prompt rewriting, so the "
                      "editor is not used", file=sys.stderr)
            extra = {}
            if entry.name.startswith("error-retrieval") and (args.retrieval_model or not zero_shot):
                from ...core.methods.error_retrieval import DEFAULT_RETRIEVAL_MODEL

                extra["embedder"] = _load(args.retrieval_model or DEFAULT_RETRIEVAL_MODEL, "classifier", args)
            mllm = _load(args.mllm, "mllm", args) if args.mllm else None
            reference = _reference(args.reference, classifier, store, ctx) if args.reference else None
            method = entry.factory(classifier, mllm, editor=editor, store=store, reference=reference, config=config,
                                   **extra)
            result = method(image, label, ctx)
    except JobCancelled as exc:
        print(f"{exc.message} Completed steps are kept in the results store; run the same command to resume.",
              file=sys.stderr)
        return 130
    finally:
        store.close()

    emit(args, result.to_dict(), lambda: format_result(result), ensure_ascii=False)
    return 0
