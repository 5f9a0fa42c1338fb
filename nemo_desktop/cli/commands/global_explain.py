"""`nemo global RUN [--score]`: summarise the per-sample explanations of a run into one global explanation of
the classifier's failure modes (NEMO paper §4.2.7), and with --score test that summary as the explanation of
every sample with CEI (Table 6: local vs global).

RUN is a run id of the results store (a benchmark run, `nemo bench run`). The MLLM, classifier and editor
default to the ones recorded in the explanations' manifests; the edit settings too, so the global CEI is
measured as the per-sample CEI was. Everything is stored: a re-run answers from the store.
"""
from __future__ import annotations


from ..loading import add_device_options
from ..options import analysis_options


def register(subparsers) -> None:
    from ..output import add_output_options

    p = subparsers.add_parser("global", help="one global explanation of a run's errors (and its CEI)",
                              description=__doc__.split("\n\n")[0],
                              derive_options=analysis_options("global-explanation", skip=("score",)))
    p.add_argument("run", metavar="RUN", help="run id in the results store")
    p.add_argument("--mllm", "-l", metavar="ID", help="MLLM that writes the summary (default: the explanations')")
    p.add_argument("--classifier", "-c", metavar="ID", help="classifier for --score (default: the explanations')")
    p.add_argument("--editor", "-e", metavar="ID", help="image editor for --score (default: the explanations')")
    p.add_argument("--score", action="store_true", help="score the global explanation with CEI on every sample")
    add_output_options(p, "the global explanation (and score)")
    add_device_options(p)
    p.set_defaults(func=run)


def format_global(g, score=None) -> str:
    what = f"'{g.method}' explanations" if g.method else "explanations"
    lines = [f"Global explanation of {g.count} {what}" + (f" in run {g.run_id}" if g.run_id else "") + ":"]
    if g.explanation:
        lines.append(f"  {g.explanation}")
    else:
        lines.append(f"  (none: {g.error})")
    if score is not None:
        lines.append("")
        if score.paired:
            lines.append(f"CEI over {score.paired} samples: per-sample explanations {score.mean_local:+.2f}, "
                         f"global explanation {score.mean_global:+.2f} ({score.gain:+.2f})")
        else:
            lines.append("CEI: no sample could be scored with both explanations.")
        lines += [f"  - {n}" for n in score.notes]
    if g.result_key:
        lines += ["", f"Stored in the results store as {g.result_key[:16]}."]
    return "\n".join(lines)


def run(args) -> int:
    from ...core.analyses.global_explanation import collect_explanations, recorded_model
    from ...core.base.errors import ConfigError
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ..loading import default_editor_id, load
    from ..options import given_options
    from ..output import emit
    from ..runner import analysis_job

    spec = get_analysis("global-explanation")
    config = make_config(spec, {**given_options(args), "score": args.score})
    with analysis_job() as (store, ctx):
        # The models default to the ones the explanations were made with (their manifests say which).
        explanations = collect_explanations(store, args.run, config.method)
        components = Components(store=store)
        mllm_id = args.mllm or recorded_model(explanations, "mllm")
        if mllm_id is None:
            raise ConfigError("The explanations record no MLLM.", hint="Give one with --mllm.")
        components.mllm = load(mllm_id, "mllm", args)
        if config.score:
            clf_id = args.classifier or recorded_model(explanations, "classifier")
            if clf_id is None:
                raise ConfigError("The explanations record no classifier.", hint="Give one with --classifier.")
            components.classifier = load(clf_id, "classifier", args)
            if not components.zero_shot:
                components.editor = load(args.editor or recorded_model(explanations, "editor")
                                         or default_editor_id(), "editor", args)
        result = build_analysis(spec, components, config)(args.run, ctx)

    g, score = result.explanation, result.score
    emit(args, {"global": g.to_dict(), "score": score.to_dict() if score is not None else None},
         lambda: format_global(g, score), ensure_ascii=False)
    from ..exit_codes import RUNTIME, SUCCESS

    return SUCCESS if g.explanation else RUNTIME  # no explanation is a failed run, not a partial one
