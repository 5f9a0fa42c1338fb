"""`nemo demo [--json]`: prepare the offline demo (a digits image dataset and a small classifier trained on first
use, registered as `demo-digits-classifier`) and print where they are.

Write a small image dataset of real handwritten digits (one folder per class) under the data folder and train a tiny
timm classifier on other digits (seconds on a CPU, first run only), registered as 'demo-digits-classifier'. A second
run reuses both. Explaining its mistakes still needs a real multimodal LLM and image editor.
"""
from __future__ import annotations


def run_demo(args) -> int:
    from ...core.demo import prepare_demo
    from ...core.base.errors import JobCancelled
    from ...core.store.paths import get_paths
    from ..output import cancelled, emit
    from ..progress import StageBars, cancellable_job

    try:
        with cancellable_job(StageBars(terminal_only=True)) as ctx:
            setup = prepare_demo(get_paths().ensure(), ctx)
    except JobCancelled as exc:
        return cancelled(args, f"{exc.message} A re-run starts the demo again from the beginning.")

    def summary() -> str:
        made = "reused" if setup.reused_classifier else f"trained in {setup.train_seconds:.0f} s"
        return "\n".join([
            f"dataset:    {setup.dataset_dir} ({setup.images} images in {len(setup.classes)} class folders)",
            f"classifier: {setup.classifier_id} at {setup.classifier_dir} ({made}, "
            f"{100 * setup.holdout_accuracy:.1f}% on the {setup.images} held-out digits)",
            *(f"note: {n}" for n in setup.notes),
            f"next: nemo index {setup.dataset_dir} --classifier {setup.classifier_id}"])

    emit(args, setup.to_dict(), summary)
    return 0


def register(subparsers) -> None:
    from ..output import add_json_option

    p = subparsers.add_parser("demo", help="prepare the offline demo: a digits dataset and a small classifier "
                                           "trained here", description=" ".join(__doc__.split("\n\n")[1].split()))
    add_json_option(p, "the demo's paths and measurements")
    p.set_defaults(func=run_demo)
