"""`nemo global RUN [--score]`: summarise the per-sample explanations of a run into one global explanation of
the classifier's failure modes (NEMO paper §4.2.7), and with --score test that summary as the explanation of
every sample with CEI (Table 6: local vs global).

RUN is a run id of the results store (a benchmark run, `nemo bench run`). The MLLM, classifier and editor
default to the ones recorded in the explanations' manifests; the edit settings too, so the global CEI is
measured as the per-sample CEI was. Everything is stored: a re-run answers from the store.
"""
from __future__ import annotations

import json
import sys
from collections import Counter


def register(subparsers) -> None:
    from ..output import add_output_options

    p = subparsers.add_parser("global", help="one global explanation of a run's errors (and its CEI)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("run", metavar="RUN", help="run id in the results store")
    p.add_argument("--method", metavar="NAME", help="aggregate the explanations of this method (needed when the "
                                                    "run holds several)")
    p.add_argument("--mllm", "-l", metavar="ID", help="MLLM that writes the summary (default: the explanations')")
    p.add_argument("--chunk-size", type=int, default=100, metavar="N",
                   help="explanations per MLLM call; larger runs are summarised in groups first (default 100)")
    p.add_argument("--max-new-tokens", type=int, default=512, metavar="N", help="cap on each reply (512)")
    p.add_argument("--score", action="store_true", help="score the global explanation with CEI on every sample")
    p.add_argument("--classifier", "-c", metavar="ID", help="classifier for --score (default: the explanations')")
    p.add_argument("--editor", "-e", metavar="ID", help="image editor for --score (default: the explanations')")
    p.add_argument("--seed", type=int, metavar="N", help="edit seed (default: the explanations')")
    p.add_argument("--edit-steps", type=int, metavar="N", help="diffusion steps (default: the explanations')")
    add_output_options(p, "the global explanation (and score)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    p.set_defaults(func=run)


def _recorded(explanations, role: str) -> str | None:
    """The model id most explanations of the run were made with."""
    ids = Counter((e.result.manifest.get("models", {}).get(role) or {}).get("id") for e in explanations)
    ids.pop(None, None)
    return ids.most_common(1)[0][0] if ids else None


def _recorded_setting(explanations, name: str):
    values = Counter(json.dumps(e.result.manifest.get("config", {}).get(name)) for e in explanations)
    return json.loads(values.most_common(1)[0][0]) if values else None


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
    from ...core.errors import ConfigError, JobCancelled
    from ...core.methods.global_explanation import GlobalConfig, GlobalExplainer, GlobalScorer, collect_explanations
    from ...core.methods.intervention import InterventionSettings
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..output import emit
    from ..progress import StageBars, cancellable_job
    from .explain import _default_editor_id, _load

    if args.chunk_size < 2 or args.max_new_tokens < 1:
        raise ConfigError("--chunk-size must be at least 2 and --max-new-tokens at least 1.")
    store = ResultsStore.open(get_paths().ensure())
    score = None
    try:
        with cancellable_job(StageBars()) as ctx:
            explanations = collect_explanations(store, args.run, args.method)
            mllm_id = args.mllm or _recorded(explanations, "mllm")
            if mllm_id is None:
                raise ConfigError("The explanations record no MLLM.", hint="Give one with --mllm.")
            mllm = _load(mllm_id, "mllm", args)
            g = GlobalExplainer(mllm, store, GlobalConfig(args.chunk_size, args.max_new_tokens)).explain(
                explanations, run_id=args.run, ctx=ctx)
            if args.score:
                clf_id = args.classifier or _recorded(explanations, "classifier")
                if clf_id is None:
                    raise ConfigError("The explanations record no classifier.", hint="Give one with --classifier.")
                classifier = _load(clf_id, "classifier", args)
                editor = None
                if not getattr(classifier, "zero_shot", False):
                    editor = _load(args.editor or _recorded(explanations, "editor") or _default_editor_id(), "editor",
                                   args)
                size = _recorded_setting(explanations, "edit_size")
                settings = InterventionSettings(
                    seed=args.seed if args.seed is not None else (_recorded_setting(explanations, "seed") or 0),
                    edit_steps=args.edit_steps if args.edit_steps is not None else
                    _recorded_setting(explanations, "edit_steps"),
                    edit_guidance=_recorded_setting(explanations, "edit_guidance"),
                    edit_size=tuple(size) if size else None,
                    max_new_tokens=_recorded_setting(explanations, "intervention_max_new_tokens") or 256)
                score = GlobalScorer(classifier, mllm, editor, store, settings).score(g, explanations, ctx)
    except JobCancelled as exc:
        print(f"{exc.message} Completed steps are kept in the results store; run the same command to resume.",
              file=sys.stderr)
        return 130
    finally:
        store.close()

    emit(args, {"global": g.to_dict(), "score": score.to_dict() if score is not None else None},
         lambda: format_global(g, score), ensure_ascii=False)
    return 0 if g.explanation else 1
