"""`nemo failure-modes DATASET_OR_INDEX`: where the classifier fails on a dataset, in words (LBEE, Csurka et al.
2024). Easy and hard images are clustered in a joint image-text space and each hard cluster is described by
sentences, four selection methods side by side; every setting below is recorded in the result.

DATASET_OR_INDEX is a reference index id (`nemo index --list`) or a dataset (class folders or a CSV manifest),
indexed now with --classifier (only new images are processed). The joint space is --embedder, else the classifier
itself when it is CLIP/SigLIP/open_clip, else the catalog's open-clip-vit-b32-laion2b. Joint embeddings are kept
in the store: a re-run embeds nothing, and Ctrl-C keeps the finished batches.
"""
from __future__ import annotations

import sys

from ..loading import add_device_options
from ..options import analysis_options
from ..output import OutputPath, add_output_options

RESUME = "Completed batches are kept in the results store; run the same command to resume."


def register(subparsers) -> None:
    p = subparsers.add_parser("failure-modes", help="where the classifier fails on a dataset, described in sentences",
                              description=__doc__.split("\n\n")[0], derive_options=analysis_options("failure-modes"))
    p.add_argument("target", metavar="DATASET_OR_INDEX", help="a reference index id, or a dataset folder / CSV")
    p.add_argument("--classifier", "-c", metavar="ID",
                   help="classifier (needed to index a dataset; for an index, give it to use a CLIP-style "
                        "classifier as the joint space)")
    p.add_argument("--embedder", metavar="ID", help="joint image-text space (catalog id or <family>:<source>)")
    p.add_argument("--mllm", "-l", metavar="ID", action="append",
                   help="MLLM(s) for --relevance vqa; repeat for several (their answers are combined with AND)")
    add_output_options(p, "the result")
    p.add_argument("--report", metavar="FILE", type=OutputPath(),
                   help="write a report (.html or .pdf by the extension)")
    p.add_argument("--rank-by", metavar="SENTENCE", action="append",
                   help="also list the images nearest this sentence in the joint space (repeatable)")
    p.add_argument("--top", type=int, default=12, metavar="N", help="images listed per --rank-by sentence (12)")
    p.add_argument("--method", choices=("tops", "pdiff", "setdiff", "fpdiff"),
                   help="the method whose sentences the summary prints and --validate-cei checks (default: FPDiff, "
                        "else the first run)")
    cei = p.add_argument_group("CEI validation", "check each failure mode's sentences with the counterfactual test: "
                               "the sentence is the hypothesis, its condition is removed from the mode's misclassified "
                               "images (--editor; a zero-shot classifier rewrites its prompt instead) and the true "
                               "class's probability must rise")
    cei.add_argument("--validate-cei", action="store_true",
                     help="validate the sentences of every failure mode that holds up (needs --classifier, --mllm "
                          "and, unless the classifier is zero-shot, --editor)")
    cei.add_argument("--editor", "-e", metavar="ID", help="image editor for --validate-cei")
    cei.add_argument("--cei-images", type=int, default=8, metavar="N",
                     help="misclassified images per sentence (8; the first N of the mode)")
    cei.add_argument("--cei-sentences", type=int, metavar="N",
                     help="sentences per failure mode, best first (default: all K)")
    cei.add_argument("--cei-threshold", type=float, default=None, metavar="POINTS",
                     help="a sentence holds up when its mean CEI (the rise of the true class's probability, in "
                          "points) is above this (default 5: unrelated edits move it by a few points)")
    add_device_options(p)
    p.set_defaults(func=run)


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def format_result(result, method: str | None = None) -> str:
    from ...core.analyses.failure_modes.describe import describe_cluster

    methods = [method] if method else result.methods
    lines = []
    for g in result.groups:
        head = "Whole dataset" if g.class_index is None else f"Class '{g.name}'"
        s = g.split
        lines.append(f"{head}: {g.size} images, accuracy {100 * (g.accuracy or 0):.1f}%; "
                     f"{s.get('hard')} hard, {s.get('easy')} easy by {s.get('score')}.")
        if not g.hard_clusters:
            lines.append("  No hard images: no failure mode to describe.")
        for i, c in enumerate(g.hard_clusters, 1):
            lines.append("  - " + describe_cluster(c, g, i, methods).sentence)
        lines += [f"  note: {n}" for n in g.notes]
    lines += [f"note: {n}" for n in result.notes]
    if result.cei_validation:
        cv = result.cei_validation
        lines.append("CEI validation (n = misclassified images with a CEI, per sentence):")
        lines += [f"  - mode {v['cluster']}{'' if v['group'] == 'all' else ' of ' + v['group']}, n={v['n']}: "
                  f"{v['verdict']}" for v in cv["validations"]]
        lines += [f"  note: {n}" for n in cv["notes"]]
    if result.evaluation:
        lines.append("Evaluation (macro over sets): " + "; ".join(
            f"{m}: AHR {_f(e['ahr'])}, ACR {_f(e['acr'])}, TPR {_f(e['tpr'])}, JI {_f(e['ji'])}"
            for m, e in result.evaluation.items()))
    rel = result.manifest.get("relevance") or {}
    if rel.get("source") == "vqa":
        qs = rel.get("questions") or {}
        writer = (rel.get("question_writer") or {}).get("id")
        how = f"each sentence its own question, written by {writer}" if writer else \
            "one fixed question quoting each sentence"
        lines.append(f"VQA relevance asked {how}" + (":" if qs else "."))
        lines += [f"  \"{s}\" -> {q}" for s, q in list(qs.items())[:10]]
        if len(qs) > 10:
            lines.append(f"  ... and {len(qs) - 10} more (--json: manifest.relevance.questions)")
        lines += [f"  note: no readable question for \"{s}\"; asked with the template" for s in
                  rel.get("question_fallbacks") or []]
    if result.p_at_k:
        pk = result.p_at_k
        lines.append(f"Clusters (all methods share them): P@{pk['k']} {_f(pk['value'])} (macro over {pk['n']} "
                     "set(s); ground-truth groups: the images of each sentence in S*_beta).")
    if result.result_key:
        lines.append(f"Stored in the results store as {result.result_key[:16]}.")
    return "\n".join(lines)


def run(args) -> int:
    from pathlib import Path

    from ...core.base.errors import ConfigError
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ..exit_codes import for_counts
    from ..loading import load, load_wanted, reference
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    spec = get_analysis("failure-modes")
    config = make_config(spec, given_options(args))
    if args.report and Path(args.report).suffix.lower() not in (".html", ".pdf"):
        raise ConfigError(f"--report {args.report}: name the file *.html or *.pdf.")
    from ...core.data.sources import is_fiftyone_ref

    is_dataset = Path(args.target).expanduser().exists() or is_fiftyone_ref(args.target)
    if is_dataset and not args.classifier:
        raise ConfigError("Indexing a dataset needs the classifier.",
                          hint="Give --classifier ID, or pass the id of an existing index (`nemo index --list`).")
    if config.relevance == "vqa" and not args.mllm:
        raise ConfigError("--relevance vqa asks an MLLM about every image and sentence.", hint="Give --mllm ID.")
    _check_cei_args(args)
    with analysis_job(RESUME, cancels_after="the current batch") as (store, ctx):
        components = Components(store=store)
        if args.classifier:
            components.classifier = load(args.classifier, "classifier", args)
        editor = _cei_editor(args, components)  # before the analysis: a missing editor fails at once
        index = reference(args.target, components.classifier, store, ctx)
        if args.embedder:
            components.embedder = load(args.embedder, "classifier", args)
        else:
            load_wanted(spec, config, components, args)
        if args.mllm:
            components.mllm = [load(m, "mllm", args) for m in args.mllm]
            if config.relevance == "vqa":
                _print_vqa_cost(config, index, len(args.mllm))
        result = build_analysis(spec, components, config)(index, ctx)
        if args.validate_cei:
            result.cei_validation = _validate_cei(args, result, index, components, editor, store, ctx)
        rankings = _rankings(args, index, components, store, ctx)
        if args.report:
            _write_report(result, store, args.report)

    write_outputs(args, {**result.to_dict(), **({"rankings": rankings} if rankings else {})},
                      ensure_ascii=False)
    if not args.json:
        print(format_result(result, args.method))
        for sentence, ranked in rankings.items():
            print(f"Images nearest \"{sentence}\":")
            for r in ranked:
                print(f"  {r['similarity']:+.3f}  {r['path']}  ({r['true']} -> {r['pred']}"
                      f"{'' if r['correct'] else ', wrong'})")
        if args.report:
            print(f"wrote report {args.report}")
    # Unreadable images make the result partial (1); an index none of whose images could be read fails (3).
    return for_counts(len(index) - result.excluded, result.excluded)


def _check_cei_args(args) -> None:
    from ...core.base.errors import ConfigError

    if not args.validate_cei:
        if args.editor:
            raise ConfigError("--editor is used by --validate-cei only.", hint="Add --validate-cei, or drop --editor.")
        return
    if not args.classifier:
        raise ConfigError("--validate-cei runs the classifier on edited images.",
                          hint="Give --classifier ID (the one the index was built with).")
    if not args.mllm:
        raise ConfigError("--validate-cei needs an MLLM to turn each sentence into an edit.", hint="Give --mllm ID.")
    if args.cei_images < 1 or (args.cei_sentences is not None and args.cei_sentences < 1):
        raise ConfigError("--cei-images and --cei-sentences must be at least 1.")


def _cei_editor(args, components):
    """The image editor --validate-cei removes conditions with (None for a zero-shot classifier)."""
    from ...core.base.errors import ConfigError
    from ..loading import load

    if not args.validate_cei:
        return None
    if components.zero_shot:
        if args.editor:
            print("note: the classifier is zero-shot; sentences are tested by prompt rewriting, so the editor is "
                  "not used", file=sys.stderr)
        return None
    if not args.editor:
        raise ConfigError("--validate-cei removes each sentence's condition with an image editor.",
                          hint="Give --editor ID (or use a zero-shot classifier).")
    return load(args.editor, "editor", args)


def _validate_cei(args, result, index, components, editor, store, ctx) -> dict:
    from ...core.analyses.failure_modes.validate import CEI_HOLDS_ABOVE, SentenceValidator, validate_modes

    threshold = CEI_HOLDS_ABOVE if args.cei_threshold is None else args.cei_threshold
    mllm = components.mllm[0] if isinstance(components.mllm, list) else components.mllm
    _print_cei_cost(args, result)
    validator = SentenceValidator(components.classifier, mllm, editor, store)
    validations, notes = validate_modes(result, index, validator, method=args.method, sentences=args.cei_sentences,
                                        max_images=args.cei_images, threshold=threshold,
                                        ctx=ctx.sub("CEI validation"))
    return {"settings": {"method": validations[0].method if validations else args.method,
                         "max_images": args.cei_images, "sentences": args.cei_sentences,
                         "threshold": threshold},
            "validations": [v.to_dict() for v in validations], "notes": notes}


def _print_cei_cost(args, result) -> None:
    from ...core.analyses.failure_modes.describe import holds_up

    modes = sum(holds_up(c, g)[0] for g in result.groups for c in g.hard_clusters)
    per_mode = min(args.cei_sentences or 10**9, int(result.config.get("k", 3)))
    n = modes * per_mode * args.cei_images
    print(f"CEI validation: {modes} failure mode(s) x {per_mode} sentence(s) x at most {args.cei_images} images = at "
          f"most {n} MLLM calls and {n} edits; checks already in the store are not run again.", file=sys.stderr)


def _rankings(args, index, components, store, ctx) -> dict[str, list[dict]]:
    from ...core.analyses.failure_modes.by_sentence import rank_by_sentence
    from ...core.base.errors import ConfigError

    if args.top < 1:
        raise ConfigError("--top must be at least 1.")
    return {s: rank_by_sentence(index, s, embedder=components.embedder, classifier=components.classifier,
                                store=store, top=args.top, ctx=ctx) for s in args.rank_by or ()}


def _print_vqa_cost(config, index, n_mllms: int) -> None:
    from ...core.analyses.failure_modes.analysis import sentence_count

    n = sentence_count(config, index.class_names)
    print(f"VQA relevance: at most {len(index) * n * n_mllms} MLLM calls ({len(index)} images x {n} sentences x "
          f"{n_mllms} MLLM{'s' if n_mllms != 1 else ''})"
          + (f", plus {n} to write each sentence's own question (once)" if config.vqa_question == "per-sentence"
             else "") + "; answers already in the store are not asked again.",
          file=sys.stderr)


def _write_report(result, store, out: str) -> None:
    from pathlib import Path

    from ...core.reports import render
    from ...core.reports.sections import build_result_report
    from ..output import write_file

    fmt = Path(out).suffix.lower().lstrip(".")
    doc = build_result_report(result, store, image_format="png" if fmt == "html" else "jpeg")
    write_file(out, render(doc, fmt))
