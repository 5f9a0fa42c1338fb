"""Running a registered analysis from the command line: the one path `nemo run ANALYSIS` takes, and the pieces the
per-analysis commands (`explain`, `fix`, `failure-modes`, `compare`, `competency ...`, `global`) share with it.

    with analysis_job("Finished epochs are kept; run the same command to resume.") as (store, ctx):
        result = build_analysis(spec, components, config)(data, ctx)

`analysis_job` opens the results store, shows the job's progress on stderr, lets the first Ctrl-C cancel the job at
its next check and turns that cancel into the one cancelled error every command reports (exit 130, JSON under
--json, output.report_error). Everything `nemo run` offers is read from the registry entry (core/registry): the
components it declares, what it runs on, its settings (the config's fields, cli/options.py).
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.registry.build import ROLE_OPTIONS

log = logging.getLogger(__name__)

RESUME = "Completed steps are kept in the results store; run the same command to resume."

# The option naming each component role (core/registry/build.py's ROLE_OPTIONS, which its error hints name),
# with its short form or alias.
ROLE_ALIASES = {"classifier": ("-c",), "mllm": ("-l",), "editor": ("-e",), "generator": ("--conditions",),
                "reference": ("-r",), "fitted": ("-E",)}
ROLE_FLAGS: dict[str, tuple[str, ...]] = {role: (flag, *ROLE_ALIASES.get(role, ()))
                                          for role, flag in ROLE_OPTIONS.items()}
ROLE_METAVARS = {"reference": "INDEX_OR_DATASET", "fitted": "KEY", "generator": "SOURCE"}
# What the positional argument is called per way of choosing the data (core/registry/data_inputs.py); the
# completion script completes IMAGE and DATASET as paths (commands/completion.py).
DATA_METAVARS = {"run": "RUN", "index": "INDEX_OR_DATASET", "dataset": "DATASET", "image": "IMAGE"}


def open_store() -> Any:
    from ..core.store import ResultsStore
    from ..core.store.paths import get_paths

    return ResultsStore.open(get_paths().ensure())


@contextmanager
def analysis_job(resume: str = RESUME, *, cancels_after: str = "the current step",
                 display: Any = None) -> Iterator[tuple[Any, Any]]:
    """(store, JobContext) for a command's job: progress on stderr, the first Ctrl-C cancels; a cancel becomes a
    JobCancelled whose message says what was kept (`resume`), reported by main like every command's cancel."""
    from ..core.base.errors import JobCancelled
    from .progress import StageBars, cancellable_job

    store = open_store()
    try:
        with cancellable_job(display or StageBars(), cancels_after) as ctx:
            yield store, ctx
    except JobCancelled as exc:
        raise JobCancelled(f"{exc.message} {resume}") from None
    finally:
        store.close()


def is_explanation_method(spec: Any) -> bool:
    """A per-sample method called as (image, true label): it also takes --true-label."""
    from ..core.base.records import ExplanationResult

    return spec.kind == "sample" and spec.result is ExplanationResult


def role_dest(role: str) -> str:
    return "component_" + role


def add_analysis_arguments(p: argparse.ArgumentParser, spec: Any) -> None:
    """`nemo run NAME`'s arguments, from the entry: its data, its components, its settings, --json/-o, devices."""
    from ..core.registry.data_inputs import data_prompt
    from ..core.registry.spec import ROLE_LABELS
    from .loading import add_device_options
    from .options import add_config_options
    from .output import add_output_options

    label, how = data_prompt(spec)
    if how != "none":
        p.add_argument("data", metavar=DATA_METAVARS.get(spec.inputs.data, "DATA"),
                       help=label + (": its id in the results store" if how == "store" else "")
                       + (" (or a dataset folder / CSV, indexed with --classifier)" if spec.inputs.data == "index"
                          else ""))
    if is_explanation_method(spec):
        p.add_argument("--true-label", "-y", required=True, metavar="LABEL", help="its true class: name or index")
    params = add_config_options(p, [spec.config])
    taken = {p_.cli_flag for p_ in params}
    models = p.add_argument_group("components")
    for role in spec.inputs.used():
        flags = tuple(f for f in ROLE_FLAGS[role] if f not in taken)
        if not flags:
            continue
        need = spec.inputs.need(role)
        why = {"required": "required", "optional": "optional",
               "interventions": "needed unless the classifier is zero-shot; default: the catalog's paper default"
               }.get(need, "")
        what = (f"a stored '{spec.inputs.fitted}' result's key" if role == "fitted" else
                "a reference index id, a dataset folder / CSV, or 'none'" if role == "reference" else
                "condition source: digits, digits-ink, dataset:FILE.csv or t2i:MODEL[@FILE]"
                if role == "generator" and not spec.generator_renders_text else
                "catalog id or <family>:<source>")
        models.add_argument(*flags, dest=role_dest(role), metavar=ROLE_METAVARS.get(role, "ID"),
                            required=need == "required" and role != "fitted" and role != "reference",
                            help=f"{ROLE_LABELS[role]}: {what}" + (f" ({why})" if why else ""))
    add_output_options(p, "the result")
    add_device_options(p)


def load_components(spec: Any, config: Any, args: argparse.Namespace, store: Any, ctx: Any) -> Any:
    """The entry's components from the command line's model references, loaded with --device/--dtype/--profile;
    a role the analysis needs but was not given gets the model the entry asks for (or the catalog's editor)."""
    from ..core.registry import Components
    from ..core.registry.data_inputs import ROLE_CATALOG_KIND
    from .loading import check_profile, load, load_editor, load_wanted, reference

    refs = {role: getattr(args, role_dest(role), None) for role in spec.inputs.used()}
    check_profile(args, {r: (ref, ROLE_CATALOG_KIND[r]) for r, ref in refs.items() if r in ROLE_CATALOG_KIND})
    components = Components(store=store)
    for role, ref in refs.items():
        if not ref or role in ("editor", "reference", "fitted"):
            continue
        if role == "generator":
            components.generator = _generator(spec, ref, args)
        else:
            setattr(components, role, load(ref, ROLE_CATALOG_KIND[role], args))
    if "editor" in refs:  # after the classifier: a zero-shot one tests hypotheses by prompt, with no editor
        components.editor = load_editor(spec, components, refs["editor"], args)
    load_wanted(spec, config, components, args)
    if refs.get("reference"):
        components.reference = reference(refs["reference"], components.classifier, store, ctx)
    if refs.get("fitted"):
        components.fitted = refs["fitted"]  # a stored key: the analysis loads its fit for its classifier
    return components


def _generator(spec: Any, ref: str, args: argparse.Namespace) -> Any:
    """A text-to-image model for an analysis that renders its own text (the fix's sentence), else a condition
    source (model differences: digits, digits-ink, dataset:CSV, t2i:MODEL[@FILE])."""
    from .loading import load

    if spec.generator_renders_text:
        return load(ref.removeprefix("t2i:"), "generator", args)
    from ..core.analyses.model_diff.sources import open_condition_source

    return open_condition_source(ref, lambda model: load(model, "generator", args))


def call_arguments(spec: Any, args: argparse.Namespace, components: Any, store: Any, ctx: Any) -> tuple:
    """What the analysis object is called with before the context, from the positional DATA (and --true-label)."""
    from ..core.data.sources import is_fiftyone_ref
    from ..core.base.errors import ConfigError
    from ..core.registry.data_inputs import call_args
    from .loading import reference

    data = getattr(args, "data", None)
    if spec.inputs.data == "index" and data:
        if (Path(data).expanduser().exists() or is_fiftyone_ref(data)) and components.classifier is None:
            raise ConfigError("Indexing a dataset needs the classifier.",
                              hint="Give --classifier ID, or pass the id of an existing index (`nemo index --list`).")
        return (reference(data, components.classifier, store, ctx),)
    out = call_args(spec, data)
    if is_explanation_method(spec):
        return (Path(out[0]), args.true_label)
    return out


def run_registered(args: argparse.Namespace) -> int:
    """`nemo run NAME ...`: build the entry from the command line and run it; the result as JSON (--json, -o) or
    its summary."""
    from ..core.base.extras import require_for_spec
    from ..core.registry import build_analysis, get_analysis, make_config
    from .options import given_options
    from .output import emit

    spec = get_analysis(args.analysis)
    config = make_config(spec, given_options(args))  # bad settings fail before anything loads
    require_for_spec(spec)
    with analysis_job() as (store, ctx):
        components = load_components(spec, config, args, store, ctx)
        call = call_arguments(spec, args, components, store, ctx)
        result = build_analysis(spec, components, config)(*call, ctx)
    if is_explanation_method(spec):  # as `nemo explain`: the outcome said apart, exit 3 without an explanation
        from .commands.explain import exit_code, result_json

        emit(args, result_json(result), lambda: summary(spec, result), ensure_ascii=False)
        return exit_code(result)
    emit(args, result.to_dict(), lambda: summary(spec, result), ensure_ascii=False)
    return 0


# The built-in analyses' summaries are the ones their own commands print; any other entry (a plugin's) gets the
# generic one.
SUMMARIES = {
    "fix": "nemo_desktop.cli.commands.fix:format_result",
    "failure-modes": "nemo_desktop.cli.commands.failure_modes:format_result",
    "model-diff": "nemo_desktop.cli.commands.compare:format_result",
    "competency-estimator": "nemo_desktop.cli.commands.competency:format_fit",
    "competency-bench": "nemo_desktop.cli.commands.competency:format_bench",
    "competency-score": "nemo_desktop.cli.commands.competency:format_score_set",
}


def summary(spec: Any, result: Any) -> str:
    import importlib

    if is_explanation_method(spec):
        from .commands.explain import format_result

        return format_result(result)
    if spec.name == "global-explanation":
        from .commands.global_explain import format_global

        return format_global(result.explanation, result.score)
    path = SUMMARIES.get(spec.name)
    if path:
        module, _, attr = path.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)(result)
        except Exception:  # noqa: BLE001 - a result its command's summary cannot read: the generic one below
            log.warning("the %s summary could not read this result; printing the generic one", spec.name,
                        exc_info=True)
    return generic_summary(spec, result)


def generic_summary(spec: Any, result: Any) -> str:
    """The result's plain fields, one a line (nested ones are in --json), and where it is stored."""
    data = result.to_dict() if hasattr(result, "to_dict") else {}
    lines = [f"{spec.name} ({spec.kind} analysis, version {spec.version}):"]
    for name, value in data.items():
        if name == "manifest" or isinstance(value, (dict, list, tuple)):
            continue
        lines.append(f"  {name}: {value}")
    key = getattr(result, "result_key", None) or getattr(result, "key", None)
    if key:
        lines.append(f"Stored in the results store as {str(key)[:16]}.")
    lines.append("Every field: --json.")
    return "\n".join(lines)
