"""`nemo compare run | score | demo`: how do two classifiers differ, in words? (seed 002, analysis `model-diff`)

    nemo compare run --model-a ID --model-b ID --conditions digits --llm ID [--judge ID] [--json] [-o FILE]
    nemo compare score --model-a ID --model-b ID --conditions digits --judge ID --explanation "Model A ..."
    nemo compare demo --llm ID      # trains the seed's two colour-biased digit CNNs (CPU, ~1 min), then runs

Models A and B are catalog ids or <family>:<source> (the same label set, matched by class name), or one
zero-shot model with two prompt sets (--prompts-a/--prompts-b, JSON {class: prompt}). The explainer LLM
(--llm) and the evaluator (--judge, default: the explainer) are MLLM ids (text-only use). Every measured
difference, LLM reply and evaluator answer is stored: Ctrl-C keeps them, the same command resumes.
"""
from __future__ import annotations

import sys

from ..loading import add_device_options
from ..options import analysis_options
from ..output import OutputPath, add_output_options

SUBCOMMANDS = ("run", "score", "demo")
HELP = {"run": "run Raw Differences, Summarization and Optimization and score them on held-out conditions",
        "score": "score your own explanation (a hypothesis) on the held-out conditions",
        "demo": "train the seed's two colour-biased digit CNNs (about a minute on a CPU) and compare them"}


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="explain in words how two classifiers differ (model differences)",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="compare_command", metavar="SUBCOMMAND")
    for name in SUBCOMMANDS:
        s = sub.add_parser(name, help=HELP[name], description=HELP[name], derive_options=analysis_options("model-diff"))
        _common(s, name)
        s.set_defaults(func=run)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(p) -> int:
    p.print_help(sys.stderr)
    return 2


def _common(s, name: str) -> None:
    if name != "demo":
        s.add_argument("--model-a", "--classifier", "-a", dest="model_a", metavar="ID", required=True,
                       help="model A: a catalog id or <family>:<source>")
        s.add_argument("--model-b", "--classifier-b", "-b", dest="model_b", metavar="ID",
                       help="model B (default: model A, with --prompts-b)")
        s.add_argument("--prompts-a", metavar="FILE", help="prompt set of zero-shot model A (JSON {class: prompt})")
        s.add_argument("--prompts-b", metavar="FILE", help="prompt set of zero-shot model B")
        s.add_argument("--conditions", default="digits", metavar="SOURCE",
                       help="condition source: digits, digits-ink, dataset:FILE.csv, t2i:MODEL[@FILE] "
                            "(default: digits)")
        s.add_argument("--cpu-offload", action="store_true", help="offload a text-to-image model to the CPU")
    s.add_argument("--llm", "--mllm", dest="llm", metavar="ID", required=(name != "score"),
                   help="explainer LLM (catalog id or <family>:<source>, e.g. openai-compatible:URL)")
    s.add_argument("--judge", "--evaluator", dest="judge", metavar="ID",
                   help="evaluator LLM (default: the explainer)")
    if name == "score":
        s.add_argument("--explanation", required=True, metavar="TEXT", help="the explanation to score")
    add_output_options(s, "the result")
    if name != "score":
        s.add_argument("--csv", metavar="OUT", type=OutputPath(),
                       help="write the measured difference of every condition as CSV, and the "
                       "explanations' scores beside it (diff.csv: diff.scores.csv)")
    add_device_options(s)


def _classifiers(args):
    from ...core.analyses.model_diff import PromptedClassifier, load_prompt_set
    from ...core.base.errors import ConfigError
    from ..loading import load

    a = load(args.model_a, "classifier", args)
    same = args.model_b is None or args.model_b == args.model_a
    if same and not (args.prompts_a and args.prompts_b):
        raise ConfigError("Give model B (--model-b), or two prompt sets for one zero-shot model "
                          "(--prompts-a and --prompts-b).")
    b = a if same else load(args.model_b, "classifier", args)
    if args.prompts_a:
        a = PromptedClassifier(a, load_prompt_set(args.prompts_a, a.class_names), name="A")
    if args.prompts_b:
        b = PromptedClassifier(b if not isinstance(b, PromptedClassifier) else b.base,
                               load_prompt_set(args.prompts_b, b.class_names), name="B")
    return a, b


def _t2i_loader(args):
    def load_t2i(ref: str):
        from ...core.models.catalog import resolve_model_ref
        from ...core.models.families import LoadOptions, load_model

        return load_model(resolve_model_ref(ref, "generator"),
                          LoadOptions(device=args.device, dtype=args.dtype, cpu_offload=args.cpu_offload))

    return load_t2i


def format_result(result) -> str:
    from ...core.reports.sections.model_diff import score_sentence

    lines = []
    for e in result.explanations:
        lines.append(f"{e.method} ({e.observed_conditions} conditions observed):")
        if e.error:
            lines.append(f"  failed: {e.error}")
            continue
        text = e.text if e.method != "raw-differences" else f"[{len(e.text.splitlines())} result lines]"
        lines.append(f"  {text}")
        lines.append(f"  {score_sentence(e.score)}")
        if e.attribution is not None and e.attribution.units:
            a = e.attribution
            top = sorted(range(len(a.units)), key=lambda i: -a.delta[i])[:3]
            lines.append("  carried by: " + ", ".join(f"\"{a.units[i]}\" ({a.delta[i]:+.2f})" for i in top)
                         + f" (token attribution on {a.conditions} conditions, AUC "
                         + ("n/a" if a.auc is None else f"{a.auc:.3f}") + ")")
    lines += [f"note: {n}" for n in result.notes]
    if result.result_key:
        lines.append(f"Stored in the results store as {result.result_key[:16]} (nemo report {result.result_key[:16]}).")
    return "\n".join(lines)


def run(args) -> int:
    from ...core.analyses.model_diff.sources import open_condition_source
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ..exit_codes import PARTIAL, RUNTIME, SUCCESS
    from ..loading import load
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    if args.compare_command == "score" and not (args.judge or args.llm):
        from ...core.base.errors import ConfigError

        raise ConfigError("Scoring needs an evaluator LLM.", hint="Give one with --judge ID.")
    spec = get_analysis("model-diff")
    config = make_config(spec, given_options(args))
    conditions = getattr(args, "conditions", "") or ""
    if conditions.startswith("t2i:"):  # a text-to-image generator: the 'editing' extra, before any model loads
        from ...core.models.family_extras import require_for_ref

        require_for_ref(conditions[4:].split("@", 1)[0], "generator")
    from ...core.base.extras import available

    if not available("tokens"):  # said before the run; the run goes on with the fallback counter
        import sys

        print("note: without the 'tokens' extra, Token Length uses tiktoken's cached vocabulary or else approximate "
              "word counts (flagged in the result): pip install 'nemo-desktop[tokens]'", file=sys.stderr)
    with analysis_job() as (store, ctx):
        if args.compare_command == "demo":
            from ...core.analyses.model_diff.demo import demo_models, demo_source

            a, b = demo_models(ctx=ctx)
            source = demo_source()
        else:
            a, b = _classifiers(args)
            source = open_condition_source(args.conditions, _t2i_loader(args))
        judge = load(args.judge, "mllm", args) if args.judge else None
        llm = load(args.llm, "mllm", args) if args.llm else judge
        pipe = build_analysis(spec, Components(classifier=a, classifier_b=b, mllm=llm, generator=source,
                                               judge=judge, store=store), config)
        if args.compare_command == "score":
            scored = pipe.score_text(args.explanation, ctx)
            from dataclasses import asdict

            write_outputs(args, {"kind": "model", "analysis": "model-diff", "score": asdict(scored),
                                 "manifest": pipe.manifest()}, ensure_ascii=False)
            if not args.json:
                from ...core.reports.sections.model_diff import score_sentence

                print(f"Your explanation: {scored.text}\n  {score_sentence(scored.score)}")
            return SUCCESS
        result = pipe(ctx)
    write_outputs(args, result.to_dict(), ensure_ascii=False)
    if args.csv:
        from ...core.analyses.model_diff.tables import write_csv_export

        write_csv_export(result, args.csv)
    if not args.json:
        print(format_result(result))
    failed = sum(e.error is not None for e in result.explanations)
    if failed == len(result.explanations):
        return RUNTIME
    return PARTIAL if failed else SUCCESS
