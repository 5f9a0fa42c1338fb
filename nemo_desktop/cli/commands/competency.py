"""`nemo competency fit | score | explain | bench | causes | lpips`: is the classifier competent on an image,

    nemo competency fit DATASET -c CLASSIFIER [--epochs 50] [--save DIR]    # fit and store a PaRCE estimator
    nemo competency score IMAGE... -c CLASSIFIER --estimator KEY_OR_DIR     # competency and its parts
    nemo competency explain IMAGE... -c CLASSIFIER --estimator KEY_OR_DIR [--mllm ID]
                                                                           # counterfactuals + MLLM explanation
    nemo competency bench IMAGES -c CLASSIFIER --estimator KEY_OR_DIR      # the generators compared (Tables 1/2)

Competency (Pohland & Tomlin's PaRCE) is the classifier's confidence times the probability that the image is
in-distribution, from an autoencoder's reconstruction loss calibrated on held-out images: low confidence means
the model is unsure, low P(in-distribution) that the image is unfamiliar. The settings come from the analyses'
configs (core/analyses/competency/config.py); every result is stored and a re-run answers from the store.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..loading import add_device_options
from ..options import analysis_options
from ..output import OutputPath, add_json_option, add_output_options, json_text

FIT, EXPLAIN, BENCH, SCORE = "competency-estimator", "competency-cf", "competency-bench", "competency-score"
# What a cancelled run keeps (said with the cancel, runner.analysis_job).
RESUME_SCORED = "Scored images are kept in the results store; run the same command to resume."
RESUME_IMAGES = "Completed images are kept in the results store; run the same command to resume."
RESUME_FINISHED = "Finished images are kept in the results store; run the same command to resume."


def _step(sub, name: str, helptext: str, description: str, analysis: str | None = None, *,
          data: tuple[str, str, str] = ("dataset", "IMAGES", "a folder of images (class folders or flat), a CSV or "
                                                               "fiftyone:NAME"),
          nargs: str | None = None, estimator: bool = True,
          classifier_help: str = "the classifier the estimator was fitted for"):
    """A step's parser with what every step takes: its images, the classifier and (but for fit) the estimator; the
    analysis' settings derived from its registry entry."""
    q = sub.add_parser(name, help=helptext, description=description,
                       derive_options=analysis_options(analysis) if analysis else None)
    dest, metavar, data_help = data
    q.add_argument(dest, metavar=metavar, help=data_help, **({"nargs": nargs} if nargs else {}))
    q.add_argument("--classifier", "-c", metavar="ID", required=True, help=classifier_help)
    if estimator:
        q.add_argument("--estimator", "-E", metavar="KEY_OR_DIR", required=True,
                       help="a stored estimator's key (or a unique prefix) or a folder written by fit --save")
    return q


def register(subparsers) -> None:
    p = subparsers.add_parser("competency", help="competency of a classifier on images, and why it is low",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="competency_command", metavar="STEP", parser_class=type(p), required=True)

    fit = _step(sub, "fit", "fit and store a competency estimator for a classifier on a labelled dataset",
                "Fit a PaRCE competency estimator: train the reconstruction autoencoder, compute per-class loss "
                "statistics and calibrate on a held-out split.", FIT,
                data=("dataset", "DATASET", "labelled images: a folder of class folders, a CSV or "
                                            "fiftyone:NAME[#FIELD]"), estimator=False,
                classifier_help="classifier (catalog id or <family>:<source>) with the differentiable extension "
                                "(timm, HF CLIP/SigLIP, open_clip)")
    fit.add_argument("--save", metavar="DIR", type=OutputPath(folder=True),
                     help="also write the estimator (safetensors + JSON) into DIR")
    add_output_options(fit, "the fit result")
    add_device_options(fit)
    fit.set_defaults(func=run_fit)

    for name, helptext, func in (("score", "competency of images (or of a whole set) and its parts", run_score),
                                 ("explain", "high-competency counterfactuals and the MLLM's explanation",
                                  run_explain)):
        analysis = EXPLAIN if name == "explain" else SCORE
        q = _step(sub, name, helptext, helptext[0].upper() + helptext[1:] + ".", analysis, nargs="+",
                  data=("images", "IMAGE", "image file(s)" + (
                      "" if name == "explain" else ", or one folder / CSV / fiftyone:NAME (a labelled set also gives "
                                                   "accuracy by competency)")))
        if name == "explain":
            q.add_argument("--mllm", "-l", metavar="ID", help="multimodal LLM that explains the low competency "
                           "(optional: without it there is no language explanation)")
            q.add_argument("--judge", metavar="ID", help="grade the explanations with this LLM (LLM Match) against "
                           "the known --cause of the images: the seed's Tables 3/4 on your images")
            q.add_argument("--cause", choices=("spatial", "brightness", "contrast", "saturation", "noise",
                                               "pixelation"), help="the true cause of low competency (with --judge)")
        add_output_options(q, "the results")
        add_device_options(q)
        q.set_defaults(func=func)

    cs = _step(sub, "causes", "test sets of the paper's low-competency causes made from your images",
               "Modify the images on which the classifier is competent (brightness, contrast, saturation, noise, "
               "pixelation) with the smallest listed factor that makes it lose competency, and write them with a "
               "causes.csv.")
    cs.add_argument("--cause", default="brightness,contrast,saturation,noise,pixelation", metavar="C[,C]",
                    help="causes to generate (default: all five modifications)")
    cs.add_argument("--threshold", type=float, default=0.9, help="competency threshold (default 0.9)")
    cs.add_argument("--max-images", type=int, metavar="N", help="modify at most N competent images")
    cs.add_argument("--out", "-o", metavar="DIR", required=True, type=OutputPath(folder=True),
                    help="folder to write the test sets into")
    add_device_options(cs)
    add_json_option(cs, "what was written")
    cs.set_defaults(func=run_causes)

    lp = sub.add_parser("lpips", help="whether LPIPS' backbone weights are installed; --download fetches them",
                        description="LPIPS (a competency metric and IGD's distance) needs torchvision's AlexNet "
                                    "weights in the torch hub cache; without them it is reported as unavailable.")
    lp.add_argument("--download", action="store_true", help="download them (233 MB, checksum verified)")
    add_json_option(lp, "the weights' status")
    lp.set_defaults(func=run_lpips)

    bench = _step(sub, "bench", "compare the generators on a set's low-competency images (Tables 1/2)",
                  "Run every counterfactual generator on the low-competency images of a set and compare success "
                  "rate, LPIPS, feature/latent similarity, FD, KD and time.", BENCH)
    bench.add_argument("--reference", metavar="IMAGES", help="reference images for FD/KD (the paper: the "
                       "calibration set); default: the set's own images at or above the threshold")
    add_output_options(bench, "the result")
    add_device_options(bench)
    bench.set_defaults(func=run_bench)


# -- fit ----------------------------------------------------------------------------------------------------
def format_fit(result) -> str:
    m, cal = result.manifest, result.calibration
    d = m.get("dataset", {})
    from ...core.analyses.competency.results import calibration_source_text

    lines = [f"Competency estimator for {m['classifier']['id']} on {d.get('n_images')} images "
             f"({d.get('n_train')} to train the autoencoder); calibrated on {calibration_source_text(d)}.",
             f"  calibration: z = {cal['z']:.2f}; mean competency {cal['mean_competency']:.3f} vs classifier "
             f"accuracy {cal['accuracy']:.3f} (n = {d.get('n_calibration')})"]
    losses = m.get("training", {}).get("loss_per_epoch") or []
    if losses:
        lines.append(f"  autoencoder: {len(losses)} epochs, final reconstruction loss {losses[-1]:.5f}")
    lines += [f"  warning: {w}" for w in result.warnings]
    if result.result_key:
        lines += ["", f"Stored as {result.result_key[:16]} (use it with --estimator)."]
    return "\n".join(lines)


def run_fit(args) -> int:
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ..exit_codes import SUCCESS
    from ..loading import load
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    spec = get_analysis(FIT)
    config = make_config(spec, given_options(args))  # bad options fail before the classifier loads
    dataset = _open_dataset(args.dataset)
    with analysis_job("Finished epochs are kept; run the same command to resume.") as (store, ctx):
        components = Components(classifier=load(args.classifier, "classifier", args), store=store)
        analysis = build_analysis(spec, components, config)
        result = analysis(dataset, ctx)
        if args.save:
            analysis.estimator.save(args.save)
    write_outputs(args, result.to_dict(), ensure_ascii=False)
    if not args.json:
        print(format_fit(result))
        if args.save:
            print(f"Written to {args.save}.")
    return SUCCESS


def _open_dataset(path: str):
    from ...core.data.datasets import open_dataset
    from ...core.data.sources import is_fiftyone_ref
    from ...core.base.errors import ConfigError

    if not is_fiftyone_ref(path) and not Path(path).exists():
        raise ConfigError(f"No dataset at {path}.", hint="Give a folder of class folders, a CSV manifest or "
                                                         "fiftyone:NAME[#FIELD].")
    return open_dataset(path)


# -- score and explain --------------------------------------------------------------------------------------
def _check_images(paths: list[str]) -> list[Path]:
    from ...core.base.errors import ConfigError

    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise ConfigError(f"No image file at {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                                else "") + ".", hint="Check the path.")
    return [Path(p) for p in paths]


def cause_of(score, threshold: float) -> str:
    """Which part of competency is low at `threshold` (results.low_part, the rule every output uses)."""
    from ...core.analyses.competency.results import LOW_PART_TEXT, low_part

    return LOW_PART_TEXT[low_part(score, threshold)]


def format_score(path, s, threshold: float) -> str:
    return (f"{path}: competency {s.competency:.3f} = confidence {s.confidence:.3f} x P(in-distribution) "
            f"{s.id_probability:.3f} (reconstruction loss {s.reconstruction_loss:.5f}, z {s.loss_z_score:+.2f}); "
            f"predicted '{s.pred_name}'; {cause_of(s, threshold)}")


def _estimator_components(args, store):
    from ...core.analyses.competency.analyses import resolve_estimator
    from ...core.registry import Components
    from ..loading import load

    classifier = load(args.classifier, "classifier", args)
    return Components(classifier=classifier, fitted=resolve_estimator(args.estimator, classifier, store),
                      store=store)


def format_score_set(result, shown: int = 20) -> str:
    sm = result.summary()
    t = result.threshold
    lines = []
    items = result.items if len(result.items) <= shown else result.lowest(shown)
    if len(result.items) > shown:
        lines.append(f"The {shown} lowest of {len(result.items)}:")
    lines += [format_score(i.path, i.score, t) for i in items]
    if sm["n"]:
        lines += ["", f"{sm['n_low']} of {sm['n']} images below competency {t} (mean {sm['mean_competency']:.3f}): "
                      f"unsure {sm['n_unsure']}, unfamiliar {sm['n_unfamiliar']}, both {sm['n_both']}, "
                      f"neither part alone (only the product) {sm.get('n_product', 0)}."]
    if sm.get("n_labelled"):
        lines.append(f"Accuracy: {_pct(sm['accuracy_low'])} of the {sm['n_labelled_low']} low-competency images, "
                     f"{_pct(sm['accuracy_high'])} of the {sm['n_labelled_high']} others.")
    if result.manifest.get("labels_not_used"):
        lines.append(f"(labels not used: {result.manifest['labels_not_used']})")
    if result.result_key:
        lines.append(f"Stored as {result.result_key[:16]} (`nemo report {result.result_key[:16]}`).")
    return "\n".join(lines)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def run_score(args) -> int:
    from ...core.analyses.competency.score_set import open_image_set
    from ...core.registry import build_analysis, get_analysis, make_config
    from ..exit_codes import for_counts
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    spec = get_analysis(SCORE)
    config = make_config(spec, given_options(args))
    from ...core.data.sources import is_fiftyone_ref

    one = args.images[0]
    if len(args.images) == 1 and (is_fiftyone_ref(one) or Path(one).is_dir() or Path(one).suffix.lower() == ".csv"):
        images = open_image_set(one)  # a dataset (labels used when they name the classifier's classes)
    else:
        images = _check_images(args.images)
    with analysis_job(RESUME_SCORED) as (store, ctx):
        result = build_analysis(spec, _estimator_components(args, store), config)(images, ctx)
    write_outputs(args, {**result.to_dict(), "summary": result.summary()}, ensure_ascii=False)
    if not args.json:
        print(format_score_set(result))
        for p, e in result.failed.items():
            print(f"{p}: failed: {e}", file=sys.stderr)
    return for_counts(len(result.items), len(result.failed))


def _fmt(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_explanation(path, r, threshold: float) -> str:
    lines = [format_score(path, r.original, threshold), "",
             f"  {'generator':<9} {'competency':>18} {'reached':>8} {'iters':>6} {'LPIPS':>6} {'feat cos':>8} "
             f"{'lat cos':>8} {'s':>7}"]
    for o in r.counterfactuals:
        if o.error and o.competency_after is None:
            lines.append(f"  {o.method.upper():<9} failed: {o.error}")
            continue
        reached = "yes" if o.success else "NO"
        lines.append(f"  {o.method.upper():<9} {_fmt(o.competency_before):>8} -> {_fmt(o.competency_after):<6} "
                     f"{reached:>8} {o.iterations if o.iterations is not None else '-':>6} {_fmt(o.lpips):>6} "
                     f"{_fmt(o.feature_similarity):>8} {_fmt(o.latent_similarity):>8} {_fmt(o.seconds, 2):>7}")
        if o.error:
            lines.append(f"  {'':<9} note: {o.error}")
    not_reached = [o.method.upper() for o in r.counterfactuals if o.success is False]
    if not_reached:
        lines.append(f"  {', '.join(not_reached)} did not reach competency {threshold}: their image is the "
                     "closest they found, not a counterfactual on which the model is competent.")
    if r.explanation_without is not None:
        lines += ["", f"  Explanation from the image alone: {r.explanation_without}"]
    for o in r.counterfactuals:
        if o.explanation is not None:
            lines.append(f"  Explanation with the {o.method.upper()} counterfactual: {o.explanation}")
    lines += [f"  note: {n}" for n in r.notes]
    if r.result_key:
        lines.append(f"  Stored as {r.result_key[:16]} (`nemo report {r.result_key[:16]}` for an HTML/PDF report).")
    return "\n".join(lines)


def incomplete(r) -> bool:
    """A generator or an MLLM call failed (the result is kept, and a re-run retries)."""
    return not r.manifest.get("complete", True) or any(o.error and o.competency_after is None
                                                        for o in r.counterfactuals)


def run_explain(args) -> int:
    from ...core.base.errors import JobCancelled, NemoError
    from ...core.registry import build_analysis, get_analysis, make_config
    from ..exit_codes import PARTIAL, RUNTIME, SUCCESS
    from ..loading import load
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    spec = get_analysis(EXPLAIN)
    config = make_config(spec, given_options(args))
    paths = _check_images(args.images)
    if bool(args.judge) != bool(args.cause):
        from ...core.base.errors import ConfigError

        raise ConfigError("--judge and --cause go together: the judge grades whether each explanation names the "
                          "cause.", hint="Give both, or neither.")
    if args.judge and not args.mllm:
        from ...core.base.errors import ConfigError

        raise ConfigError("--judge grades the MLLM's explanations, and no --mllm was given.")
    results, failed = {}, {}
    with analysis_job(RESUME_IMAGES) as (store, ctx):
        components = _estimator_components(args, store)
        components.mllm = load(args.mllm, "mllm", args) if args.mllm else None
        analysis = build_analysis(spec, components, config)
        for i, path in enumerate(paths):
            try:
                results[str(path)] = analysis(path, ctx.sub(path.name, i / len(paths), (i + 1) / len(paths)))
            except JobCancelled:
                raise
            except NemoError as exc:  # e.g. an unreadable image: reported, the others go on
                failed[str(path)] = exc.message
        accuracy = _grade(args, store, components, list(results.values()), ctx) if args.judge else None
    accuracy_rows = None if accuracy is None else {"cause": args.cause, "rows": [a.to_dict() for a in accuracy]}
    write_outputs(args, {"results": {p: r.to_dict() for p, r in results.items()}, "errors": failed,
                         "accuracy": accuracy_rows}, ensure_ascii=False)
    if not args.json:
        for p, r in results.items():
            print(format_explanation(p, r, config.threshold))
            print()
        for p, e in failed.items():
            print(f"{p}: failed: {e}", file=sys.stderr)
        if accuracy is not None:
            print(format_accuracy(accuracy, args.cause))
    if not results:
        return RUNTIME
    if failed or any(incomplete(r) for r in results.values()) or (accuracy is not None and any(
            a.n_scored < a.n for a in accuracy)):
        return PARTIAL
    return SUCCESS


def _grade(args, store, components, results, ctx):
    from ...core.benchmark.competency_grading import explanation_accuracy
    from ...core.benchmark.judge import LLMMatchJudge
    from ..loading import load

    judge = LLMMatchJudge(load(args.judge, "mllm", args), store=store)
    name = (components.fitted.manifest.get("dataset") or {}).get("name") or "the training dataset"
    return explanation_accuracy(results, args.cause, judge, Path(name).name or name, ctx.sub("Grading"))


def format_accuracy(rows, cause: str) -> str:
    lines = [f"Explanations naming the cause '{cause}' (LLM Match: 1 full, 0.5 partial, 0 none):"]
    for a in rows:
        what = "original alone" if a.condition == "original" else f"with the {a.condition.upper()} counterfactual"
        acc = "-" if a.accuracy is None else f"{a.accuracy:.2f}"
        failed = f", {a.n - a.n_scored} not graded (the judge failed)" if a.n_scored < a.n else ""
        lines.append(f"  {what:<34} {acc:>5}  (n = {a.n_scored}{failed})")
    return "\n".join(lines)


# -- bench --------------------------------------------------------------------------------------------------
def format_bench(result) -> str:
    m = result.manifest
    lines = [f"{m.get('n_used')} low-competency images (of {m.get('n_low_competency')} below the threshold among "
             f"{m.get('n_images')}); {result.feature_space}/KD against {result.n_reference} reference images.",
             f"  {'generator':<9} {'n':>4} {'success':>14} {'LPIPS':>6} {'feat cos':>8} {'lat cos':>8} "
             f"{result.feature_space:>9} {'KD':>8} {'s/img':>7}"]
    for r in result.rows:
        name = "original" if r.method == "orig" else r.method.upper()
        if not r.available:
            lines.append(f"  {name:<9} {r.n:>4} unavailable: {'; '.join(r.notes)}")
            continue
        rate = "-" if r.method == "orig" else f"{r.success_rate:.0%} ({r.n_success}/{r.n})"
        lines.append(f"  {name:<9} {r.n:>4} {rate:>14} {_fmt(r.lpips):>6} {_fmt(r.feature_similarity):>8} "
                     f"{_fmt(r.latent_similarity):>8} {_fmt(r.fd):>9} {_fmt(r.kd, 4):>8} "
                     f"{_fmt(r.seconds_per_image):>7}")
    lines.append("  (LPIPS and cosine similarities: means over successful pairs; FD/KD: lower is closer)")
    if result.result_key:
        lines.append(f"Stored as {result.result_key[:16]} (`nemo report {result.result_key[:16]}`).")
    return "\n".join(lines)


def run_bench(args) -> int:
    from ...core.analyses.competency.score_set import open_image_set
    from ...core.registry import build_analysis, get_analysis, make_config
    from ..exit_codes import SUCCESS
    from ..options import given_options
    from ..output import write_outputs
    from ..runner import analysis_job

    spec = get_analysis(BENCH)
    from ...core.base.extras import require_for_spec

    require_for_spec(spec)  # FD/KD and LPIPS: the 'competency' extra, checked before any image is read
    config = make_config(spec, given_options(args))
    images = open_image_set(args.dataset)
    reference = open_image_set(args.reference) if args.reference else None
    with analysis_job(RESUME_FINISHED) as (store, ctx):
        analysis = build_analysis(spec, _estimator_components(args, store), config)
        result = analysis(images, ctx, reference=reference)
    write_outputs(args, result.to_dict(), ensure_ascii=False)
    if not args.json:
        print(format_bench(result))
    return SUCCESS


def run_lpips(args) -> int:
    from ...core.analyses.competency.lpips_distance import download_trunk, trunk_status
    from ...core.base.extras import require
    from ..exit_codes import RUNTIME, SUCCESS

    require("competency", "LPIPS")

    status = trunk_status("alex")
    if not status["present"] and args.download:
        download_trunk("alex")  # a failure is reported by the command line (JSON under --json), exit 3
        status = trunk_status("alex")
    if args.json:
        print(json_text(status, default=str))
        return SUCCESS if status["present"] or not args.download else RUNTIME
    print(f"LPIPS (AlexNet) weights: {'present' if status['present'] else 'missing'} at {status['path']}")
    if not status["present"]:
        print("Without them LPIPS is reported as unavailable; `nemo competency lpips --download` fetches them.")
    return SUCCESS if status["present"] or not args.download else RUNTIME


def run_causes(args) -> int:
    from collections import Counter

    from ...core.analyses.competency.cause_sets import write_cause_sets
    from ...core.analyses.competency.config import as_names
    from ...core.analyses.competency.score_set import open_image_set
    from ...core.base.errors import ConfigError
    from ..exit_codes import RUNTIME, SUCCESS
    from ..runner import analysis_job

    if not 0.0 <= args.threshold <= 1.0:
        raise ConfigError(f"--threshold must be between 0 and 1, not {args.threshold}.")
    images = open_image_set(args.dataset)
    paths = list(images.paths) if hasattr(images, "paths") else list(images)
    with analysis_job("Images written so far are kept.") as (store, ctx):
        est = _estimator_components(args, store).fitted
        rows, n = write_cause_sets(est, paths, as_names(args.cause), args.out, threshold=args.threshold,
                                   max_images=args.max_images, ctx=ctx)
    per_cause = Counter(r.cause for r in rows)
    if args.json:
        print(json_text({"out": str(args.out), "modified": n, "lost_competency": {
            c: per_cause.get(c, 0) for c in as_names(args.cause)}}))
        return SUCCESS if rows else RUNTIME
    print(f"Modified {n} competent images; written to {args.out} (causes.csv lists them):")
    for cause in as_names(args.cause):
        print(f"  {cause:<11} {per_cause.get(cause, 0):>5} of {n} lost competency")
    return SUCCESS if rows else RUNTIME
