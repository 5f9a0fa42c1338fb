"""`nemo fix FOLDER`: try a fix for a finding, measure it, keep it only if it helps (issue 29).

FOLDER holds train/ (the classifier's training data), affected/ (held-out images the finding covers) and rest/
(every other held-out image), each with one sub-folder per class named as the classifier's classes; an optional
finding/ holds a failure mode's own images, added to an edit fix's training data with their true labels. Targeted data
comes from the finding's validated edit (--instruction, applied with --editor to training images of the predicted
classes; --cue-instruction adds the cause to images of the affected classes), or from a plain augmentation
(--data augment: the control), and/or from a failure mode's sentence (--sentence, rendered by the text-to-image
model --generator, labelled with the affected class). The copy of the model is trained (--mode head, last-block,
lora or full) with early stopping, keeping the original's outputs on its training images (--preserve); the fixed
weights are a moving average of the trained ones (--average-epochs), optionally mixed back towards the original
weights (--interpolation held-out); the fix is measured before and after with
paired bootstrap intervals, and saved as a new catalog entry only when the regression guard keeps it. Ctrl-C
keeps the last epoch's checkpoint: run the same command to resume.

--failure-modes KEY --failure-mode N takes the finding from a stored failure-modes result instead: its N-th mode's
images, with their true labels, join the training data (those also held out are left out).

--from-result KEY takes the edit and the classes from a stored, validated explanation (e.g. SciTX's). For a
zero-shot classifier (CLIP, SigLIP, open_clip) the fix is a prompt: --prompt CLASS=TEXT (or a prompt
intervention from --from-result) is measured on affected/ and rest/ and, when the guard keeps it, saved as the
next version of the prompt set --prompt-set NAME.
"""
from __future__ import annotations

from ..loading import add_device_options
from ..options import analysis_options
from ..output import add_output_options


def register(subparsers) -> None:
    p = subparsers.add_parser("fix", help="try a fix for a finding: targeted fine-tuning, measured, kept only if "
                                          "it helps", description=__doc__.split("\n\n")[0],
                              derive_options=analysis_options("fix", skip=("prompts",)))
    p.add_argument("folder", metavar="FOLDER", help="a folder with train/, affected/ and rest/ (class sub-folders)")
    p.add_argument("--classifier", "-c", metavar="ID", required=True, help="the classifier to fix (catalog id or "
                                                                          "<family>:<source>)")
    p.add_argument("--editor", "-e", metavar="ID", help="image editor that applies the edit (--data edit)")
    p.add_argument("--generator", "-g", metavar="ID", help="text-to-image model that renders the failure mode's "
                                                         "sentence (--sentence; a catalog generator, e.g. "
                                                         "flux-schnell)")
    p.add_argument("--from-result", metavar="KEY", help="take the finding from a stored validated explanation")
    p.add_argument("--prompt", metavar="CLASS=TEXT", action="append",
                   help="zero-shot classifiers: the class prompt to adopt (repeatable; --prompt-set, derived from "
                        "the fix's settings, names the set it is saved to)")
    add_output_options(p, "the result")
    add_device_options(p)
    p.set_defaults(func=run)


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_result(result) -> str:
    if result.adopts_prompt:  # a prompt adoption trains nothing: its own summary
        return format_prompt_result(result)
    a, r, g = result.affected["overall"], result.rest["overall"], result.guard
    t = result.training
    lines = [f"Fix of {result.classifier['id']} ({result.config['mode']}, {result.config['data']} data): "
             f"{result.data['targeted']} targeted image(s) added to {result.data['train']}."]
    for s in result.sources:
        what = s.get("instruction") or (f"'{s['prompt']}' rendered by {s['generator']['id']}" if s.get("prompt")
                                         else s["source"])
        lines.append(f"  - {s['count']} image(s) of '{s['class']}': {what} ({s['source']})")
    resumed = f", resumed after epoch {t['resumed_from_epoch']}" if t.get("resumed_from_epoch") else ""
    lines.append(f"Trained {t['epochs']} epoch(s), {t['steps']} steps, best epoch {t['best_epoch']}"
                 f"{', stopped early' if t['stopped_early'] else ''}{resumed} in "
                 f"{result.timings.get('training', 0):.1f} s; {result.trainable['trainable']:,} of "
                 f"{result.trainable['total']:,} weights trained.")
    mixing = t.get("interpolation")
    w = result.config.get("preserve", 0)
    lines.append((f"Kept the original's outputs on its training images with weight {w:g}" if w else
                  "No preservation term (labels only)")
                 + (f"; weights mixed at a = {mixing['mix']:g} between the original (0) and the trained (1), chosen "
                    f"on the held-out split" if mixing else "") + ".")
    if t.get("average_decay") is not None:
        lines.append(f"The fixed weights are the moving average of the trained ones over about "
                     f"{result.config['average_epochs']:g} epoch(s) (EMA decay {t['average_decay']:.4f} per step).")
    for name, o in (("The finding's images", a), ("Everything else", r)):
        flips = f"; {o['gained']} image(s) gained, {o['lost']} lost" if "lost" in o else ""
        lines.append(f"{name}: {_pct(o['before'])} -> {_pct(o['after'])}, {o['change']:+.1f} points "
                     f"(95% CI {o['ci'][0]:+.1f} to {o['ci'][1]:+.1f}, n={o['n']}{flips}).")
    moved = [c for c in result.rest["per_class"].items() if abs(c[1]["change"] or 0) > result.config["margin"]]
    for name, c in moved:
        flips = f"; {c['lost']} image(s) lost, {c['gained']} gained" if "lost" in c else ""
        lines.append(f"  class {name}: {c['change']:+.1f} points (95% CI {c['ci'][0]:+.1f} to {c['ci'][1]:+.1f}, "
                     f"n={c['n']}{flips})")
    for c in result.affected["confusions"][:5]:
        lines.append(f"  {c['true']} taken for {c['pred']}: {c['before']} -> {c['after']} image(s)")
    lines.append(f"Guard: {g['verdict']}: {g['why']}.")
    if result.saved and result.saved.get("id"):
        lines.append(f"Saved as the catalog entry '{result.saved['id']}' ({result.saved['weights']}); load it with "
                     f"--classifier {result.saved['id']}.")
    lines += [f"note: {n}" for n in result.notes]
    if result.result_key:
        lines.append(f"Stored in the results store as {result.result_key[:16]}.")
    return "\n".join(lines)


def run(args) -> int:
    import sys
    from pathlib import Path

    from ...core.base.errors import ConfigError, JobCancelled
    from ...core.registry import Components, build_analysis, get_analysis, make_config
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..loading import load
    from ..options import given_options
    from ..output import cancelled, write_outputs
    from ..progress import StageBars, cancellable_job

    spec = get_analysis("fix")
    options = given_options(args)
    store = ResultsStore.open(get_paths().ensure())
    try:
        finding = _finding(args, store)
        options.update({k: v for k, v in finding.items() if k in spec.config.__dataclass_fields__
                        and k not in options})
        config = make_config(spec, options)
        if config.mode == "lora":
            from ...core.base.extras import require

            require("fix", "A LoRA fix (--mode lora)")  # before the classifier loads and the data is prepared
        classifier = load(args.classifier, "classifier", args)
        if getattr(classifier, "zero_shot", False):  # the fix's mode prompt: adopting class prompts
            if not finding.get("prompt"):
                raise ConfigError(f"{classifier.info.model_id} is zero-shot: its fix is a class prompt.",
                                  hint="Give --prompt CLASS=TEXT, or --from-result KEY of a prompt intervention.")
            config = make_config(spec, {**options, "mode": "prompt",
                                        "prompts": config.prompts_text(finding["prompt"])})
        elif args.prompt:
            raise ConfigError("--prompt adopts a class prompt of a zero-shot classifier; this one is trained.",
                              hint="Fix it with targeted data (--instruction / --data) instead.")
        finding_images = (Path(args.folder).expanduser() / "finding").is_dir() or bool(config.failure_modes)
        config.check_plan(finding=finding_images)
        with cancellable_job(StageBars(), cancels_after="the current step") as ctx:
            components = Components(store=store, classifier=classifier)
            if config.data == "edit" and args.editor:
                components.editor = load(args.editor, "editor", args)
            if config.data == "edit" and config.sentence.strip() and args.generator:
                components.generator = load(args.generator, "generator", args)
            analysis = build_analysis(spec, components, config)
            for line in analysis.plan_lines():
                print(line, file=sys.stderr if args.json else sys.stdout, flush=True)
            result = analysis(args.folder, ctx)
    except JobCancelled as exc:
        return cancelled(args, f"{exc.message} The last epoch's checkpoint and the edited images are kept; run the "
                               "same command to resume. No catalog entry was written.")
    finally:
        store.close()
    write_outputs(args, result.to_dict(), ensure_ascii=False)
    if not args.json:
        print(format_result(result))
    return 0


def _finding(args, store) -> dict:
    """The finding from --from-result, then --prompt (CLASS=TEXT) on top."""
    from ...core.analyses.fix.finding import finding_from_explanation
    from ...core.base.errors import ConfigError

    finding: dict = {}
    if args.from_result:
        stored = store.get(args.from_result)
        if stored is None:
            raise ConfigError(f"No stored result with key {args.from_result}.",
                              hint="`nemo explain ... --json` prints a result's key (result_key).")
        finding = finding_from_explanation(stored.payload)
    for item in args.prompt or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise ConfigError(f"--prompt {item}: write it as CLASS=TEXT.")
        finding.setdefault("prompt", {})[name.strip()] = text.strip()
    return finding


def format_prompt_result(result) -> str:
    """A zero-shot fix (mode prompt) in words: the prompts adopted, the figures, the guard, the prompt set."""
    a, r = result.affected["overall"], result.rest["overall"]
    changes = "; ".join(f"{k}: {v!r}" for k, v in result.prompts["changes"].items())
    lines = [f"Adopting the prompt(s) {changes}"]
    for name, o in (("The finding's images", a), ("Everything else", r)):
        lines.append(f"{name}: {_pct(o['before'])} -> {_pct(o['after'])}, {o['change']:+.1f} points "
                     f"(95% CI {o['ci'][0]:+.1f} to {o['ci'][1]:+.1f}, n={o['n']}).")
    lines.append(f"Guard: {result.guard['verdict']}: {result.guard['why']}.")
    if result.saved:
        lines.append(f"Saved as version {result.saved['version']} of the prompt set '{result.saved['name']}'.")
    lines += [f"note: {n}" for n in result.notes]
    if result.result_key:
        lines.append(f"Stored in the results store as {result.result_key[:16]}.")
    return "\n".join(lines)
