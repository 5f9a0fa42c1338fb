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

from pathlib import Path

from ..loading import add_device_options


def register(subparsers) -> None:
    from ..output import add_output_options

    p = subparsers.add_parser("explain",
                              help="explain a misclassified image (SciTX or a baseline) and test the explanation",
                              description=__doc__.split("\n\n")[0], derive_options=_method_options)
    add_output_options(p, "the full result")
    add_device_options(p)
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
    p.add_argument("--corpus-file", action="append", default=[], metavar="FILE",
                   help="error-retrieval: extra error-sentence file (.json or .tsv; repeatable)")
    p.add_argument("--no-class-relevance", action="store_true",
                   help="retrieve by similarity only (the paper's Table 5 ablation)")
    p.add_argument("--k-pooled", action="store_true",
                   help="take the --k nearest of the true and predicted classes together instead of --k of each "
                        "(same as --k-scope pooled)")
    p.add_argument("--edit-size", metavar="WxH|native",
                   help="edit at this size, or 'native' for the image's own size (default: the editor's preferred "
                        "working resolution, aspect ratio kept; the result is resized back to the image's size)")
    p.add_argument("--max-new-tokens", type=int, metavar="N",
                   help="cap on every MLLM reply (default: 160 for captions, 512 for hypotheses, 256 for "
                        "interventions)")
    p.set_defaults(func=run)


def _method_options(p) -> None:
    """Every other setting comes from the methods' config fields (core/registry/params.py): a new field is a new
    option. An option the chosen method does not have is refused (make_config)."""
    from ...core.registry.methods import get_method, list_methods
    from ..options import add_config_options

    add_config_options(p, [get_method(n).config for n in list_methods()],
                       skip=("validate", "class_relevance", "corpus_files", "edit_size"))
    # --method names every registered method, plugins' included (core/base/plugins.py)
    for action in p._actions:
        if action.dest == "method":
            action.help = f"one of {', '.join(list_methods())} (default: scitx)"


# -- the method -----------------------------------------------------------------------------------------------
def method_name(method: str, validate: bool) -> str:
    """The registry name for --method/--validate: a baseline's `-validated` variant; SciTX always validates."""
    from ...core.registry.methods import list_methods
    from ...core.methods.validation import VALIDATED_SUFFIX

    if not validate or method == "scitx" or method.endswith(VALIDATED_SUFFIX):
        return method
    if method + VALIDATED_SUFFIX not in list_methods():
        from ...core.base.errors import ConfigError

        raise ConfigError(f"The method '{method}' has no validated variant.",
                          hint=f"Known methods: {', '.join(list_methods())}.")
    return method + VALIDATED_SUFFIX


# -- output -------------------------------------------------------------------------------------------------
def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[:width - 1] + "…"


def format_result(result) -> str:
    from ...core.metrics.edit_distance import describe

    s = result.sample
    lines = [f"Image:      {s.image_path or '(image)'}",
             f"Prediction: '{s.pred_name}' (p = {s.prob_pred:.3f}); true class '{s.true_name}' "
             f"(p = {s.prob_true:.3f})"]
    if result.method != "scitx":
        lines.append(f"Method:     {result.method}")
    lines.append("")
    if result.no_cause_found():
        lines += [f"{result.no_cause_found()}; the least harmful one:",
                  f"  {result.explanation}", ""]
    elif result.explanation is not None:
        score = f"CEI {result.cei:+.2f}" if result.cei is not None else "not scored with CEI"
        lines += [f"Explanation ({score}):", f"  {result.explanation}", ""]
    else:  # tested but none selected, or nothing could be tested: which, and why
        outcome, why = result.outcome()
        head = "Tested, no cause found" if outcome == "no cause found" else "Nothing could be tested"
        lines += [f"{head}: {why}", ""]
    lines.append("Candidates (CEI: how many percentage points the counterfactual raised P(true)):")
    lines.append(f"  {'#':>2}  {'CEI':>8}  {'P(true) before -> after':<24}  hypothesis")
    for i in result.candidate_order():
        c = result.candidates[i]
        mark = "*" if i == result.selected_index else " "
        score = f"{c.cei:+8.2f}" if c.cei is not None else f"{'-':>8}"
        probs = (f"{c.prob_true_before:.3f} -> {c.prob_true_after:.3f}" if c.prob_true_after is not None
                 else "")
        lines.append(f"{mark} {i + 1:>2}  {score}  {probs:<24}  {_short(c.hypothesis, 100) or '(none)'}")
        if c.intervention:
            what = "edit" if c.intervention_kind == "image" else "prompt"
            lines.append(f"  {'':>2}  {'':>8}  {'':<24}  {what}: {_short(c.intervention, 90)}")
        if c.edit_distance is not None:
            moved = describe(c.edit_distance, c.edit_distance_metric, c.edit_flagged, structure=c.edit_structure,
                             verdict=c.edit_verdict)
            lines.append(f"  {'':>2}  {'':>8}  {'':<24}  distance from the original: {moved}")
            if c.edit_verdict_reason:
                lines.append(f"  {'':>2}  {'':>8}  {'':<24}  verdict: {c.edit_verdict_reason}")
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


def _options(args, spec) -> dict:
    """The options the user gave, by config field; the old spellings map onto the fields the method has."""
    from ...core.base.errors import ConfigError
    from ...core.registry.params import config_params
    from ..options import given_options

    known = {p.name for p in config_params(spec.config)}
    options = given_options(args)
    if args.max_new_tokens is not None:
        if args.max_new_tokens < 1:
            raise ConfigError("--max-new-tokens must be at least 1.")
        for name in ("caption_max_new_tokens", "hypothesis_max_new_tokens", "intervention_max_new_tokens"):
            if name in known:
                options.setdefault(name, args.max_new_tokens)
    if args.no_class_relevance:
        options["class_relevance"] = False
    if args.corpus_file:
        options["corpus_files"] = tuple(args.corpus_file)
    if args.k_pooled:
        options["k_scope"] = "pooled"
    if args.edit_size:
        if args.edit_size.strip().lower() == "native":
            options["edit_resolution"] = "native"
        else:
            from ...core.registry.params import config_params, parse_value

            size = next((p for p in config_params(spec.config) if p.name == "edit_size"), None)
            if size is None:
                raise ConfigError(f"The method {spec.name} has no option edit_size.")
            options["edit_size"] = parse_value(size, args.edit_size)
    return options


def _check_extras(spec, args) -> None:
    """Before any model loads: the editor this run would load needs the 'editing' extra (diffusers editors)."""
    from ...core.models.family_extras import family_of, require_for_ref
    from ...core.models.catalog import ZERO_SHOT_FAMILIES
    from ..loading import default_editor_id

    need = spec.inputs.editor
    if family_of(args.classifier, "classifier") in ZERO_SHOT_FAMILIES:
        return  # hypotheses are tested by rewriting prompts: no editor is loaded
    if need in ("required", "interventions"):
        require_for_ref(args.editor or default_editor_id(), "editor")
    elif need == "optional" and args.editor:
        require_for_ref(args.editor, "editor")


def run(args) -> int:
    from ...core.base.errors import ConfigError
    from ...core.methods.labels import resolve_label
    from ...core.registry.methods import get_method
    from ...core.registry import Components, build_analysis, make_config
    from ..loading import check_profile, default_editor_id, load, load_editor, load_wanted, reference
    from ..output import emit
    from ..runner import analysis_job

    image = Path(args.image)
    if not image.is_file():
        raise ConfigError(f"No image file at {image}.", hint="Check the path.")
    spec = get_method(method_name(args.method, args.validate))
    inputs = spec.inputs
    config = make_config(spec, _options(args, spec))  # unknown options and bad ranges fail before any load
    if args.mllm is None and (inputs.mllm == "required" or spec.needs_editor):
        raise ConfigError(f"--mllm is required for the method {spec.name}.",
                          hint="Give a multimodal LLM: a catalog id (`nemo models list`) or <family>:<source>.")
    if args.reference is None and inputs.reference != "none":  # an explicit choice, 'none' where optional
        raise ConfigError(f"--reference is required for the method {spec.name}.",
                          hint="Give a reference dataset or index id" + (
                              ", or 'none' for no observations." if inputs.reference == "optional" else "."))

    _check_extras(spec, args)
    with analysis_job() as (store, ctx):
        components = Components(classifier=load(args.classifier, "classifier", args), store=store)
        label = args.true_label  # a class name first, else an index (resolve_label)
        resolve_label(label, components.classifier.class_names)  # a typo fails before the big models load
        editor_ref = None if components.zero_shot else args.editor or (
            default_editor_id() if inputs.editor in ("required", "interventions") else None)
        check_profile(args, {"classifier": (args.classifier, "classifier"), "mllm": (args.mllm, "mllm"),
                             "editor": (editor_ref, "editor")})  # a profile that cannot fit: before loading
        components.editor = load_editor(spec, components, args.editor, args)
        load_wanted(spec, config, components, args)
        components.mllm = load(args.mllm, "mllm", args) if args.mllm else None
        if args.reference and inputs.reference != "none":
            components.reference = reference(args.reference, components.classifier, store, ctx)
        method = build_analysis(spec, components, config)
        result = method(image, label, ctx)

    emit(args, result_json(result), lambda: format_result(result), ensure_ascii=False)
    return exit_code(result)


def result_json(result) -> dict:
    """The full result, with its outcome said apart: explained, "no cause found" (tested) or "nothing could be
    tested", and the reason for the last two."""
    outcome, why = result.outcome()
    return {**result.to_dict(), "outcome": {"status": outcome, "reason": why}}


def exit_code(result) -> int:
    """0: an explanation, every step worked; 1 (partial): an explanation, but some candidates or steps failed;
    3 (runtime): no explanation at all (e.g. every request to the model endpoint failed)."""
    from ...core.methods.pipeline_steps import INCOMPLETE_NOTE
    from ..exit_codes import PARTIAL, RUNTIME, SUCCESS

    if result.explanation is None:
        return RUNTIME
    failed = any(c.error for c in result.candidates) or INCOMPLETE_NOTE in result.notes
    return PARTIAL if failed else SUCCESS
