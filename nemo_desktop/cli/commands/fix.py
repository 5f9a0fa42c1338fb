"""`nemo fix FOLDER`: try a fix for a finding, measure it, keep it only if it helps (issue 29).

FOLDER holds train/ (the classifier's training data), affected/ (held-out images the finding covers) and rest/
(every other held-out image), each with one sub-folder per class named as the classifier's classes. Targeted data
comes from the finding's validated edit (--instruction, applied with --editor to training images of the predicted
classes; --cue-instruction adds the cause to images of the affected classes), or from a plain augmentation
(--data augment: the control). The copy of the model is trained (--mode head, last-block, lora or full) with early
stopping, measured before and after with paired bootstrap intervals, and saved as a new catalog entry only when the
regression guard keeps it. Ctrl-C keeps the last epoch's checkpoint: run the same command to resume.
"""
from __future__ import annotations

from ..loading import add_device_options
from ..output import add_output_options


def register(subparsers) -> None:
    p = subparsers.add_parser("fix", help="try a fix for a finding: targeted fine-tuning, measured, kept only if "
                                          "it helps", description=__doc__.split("\n\n")[0],
                              derive_options=_analysis_options)
    p.add_argument("folder", metavar="FOLDER", help="a folder with train/, affected/ and rest/ (class sub-folders)")
    p.add_argument("--classifier", "-c", metavar="ID", required=True, help="the classifier to fix (catalog id or "
                                                                          "<family>:<source>)")
    p.add_argument("--editor", "-e", metavar="ID", help="image editor that applies the edit (--data edit)")
    add_output_options(p, "the result")
    add_device_options(p)
    p.set_defaults(func=run)


def _analysis_options(p) -> None:
    from ...core.registry import get_analysis
    from ..options import add_config_options

    add_config_options(p, [get_analysis("fix").config])


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_result(result) -> str:
    a, r, g = result.affected["overall"], result.rest["overall"], result.guard
    t = result.training
    lines = [f"Fix of {result.classifier['id']} ({result.config['mode']}, {result.config['data']} data): "
             f"{result.data['targeted']} targeted image(s) added to {result.data['train']}."]
    for s in result.sources:
        what = s.get("instruction") or s["source"]
        lines.append(f"  - {s['count']} image(s) of '{s['class']}': {what} ({s['source']})")
    resumed = f", resumed after epoch {t['resumed_from_epoch']}" if t.get("resumed_from_epoch") else ""
    lines.append(f"Trained {t['epochs']} epoch(s), {t['steps']} steps, best epoch {t['best_epoch']}"
                 f"{', stopped early' if t['stopped_early'] else ''}{resumed} in {result.timings.get('training', 0):.1f} s; {result.trainable['trainable']:,} of "
                 f"{result.trainable['total']:,} weights trained.")
    for name, o in (("The finding's images", a), ("Everything else", r)):
        lines.append(f"{name}: {_pct(o['before'])} -> {_pct(o['after'])}, {o['change']:+.1f} points "
                     f"(95% CI {o['ci'][0]:+.1f} to {o['ci'][1]:+.1f}, n={o['n']}).")
    moved = [c for c in result.rest["per_class"].items() if abs(c[1]["change"] or 0) > result.config["margin"]]
    for name, c in moved:
        lines.append(f"  class {name}: {c['change']:+.1f} points (95% CI {c['ci'][0]:+.1f} to {c['ci'][1]:+.1f}, "
                     f"n={c['n']})")
    for c in result.affected["confusions"][:5]:
        lines.append(f"  {c['true']} taken for {c['pred']}: {c['before']} -> {c['after']} image(s)")
    lines.append(f"Guard: {g['verdict']}: {g['why']}.")
    if result.saved:
        lines.append(f"Saved as the catalog entry '{result.saved['id']}' ({result.saved['weights']}); load it with "
                     f"--classifier {result.saved['id']}.")
    lines += [f"note: {n}" for n in result.notes]
    if result.result_key:
        lines.append(f"Stored in the results store as {result.result_key[:16]}.")
    return "\n".join(lines)


def run(args) -> int:
    from ...core.errors import JobCancelled
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..loading import load
    from ..options import given_options
    from ..output import cancelled, write_outputs
    from ..progress import StageBars, cancellable_job

    spec = get_analysis("fix")
    config = make_config(spec, given_options(args))
    config.check_plan()
    store = ResultsStore.open(get_paths().ensure())
    try:
        with cancellable_job(StageBars(), cancels_after="the current step") as ctx:
            components = Components(store=store, classifier=load(args.classifier, "classifier", args))
            if config.data == "edit" and args.editor:
                components.editor = load(args.editor, "editor", args)
            result = build_analysis(spec, components, config)(args.folder, ctx)
    except JobCancelled as exc:
        return cancelled(args, f"{exc.message} The last epoch's checkpoint and the edited images are kept; run the "
                               "same command to resume. No catalog entry was written.")
    finally:
        store.close()
    write_outputs(args, result.to_dict(), ensure_ascii=False)
    if not args.json:
        print(format_result(result))
    return 0
