"""Loading models, references and components for a command (shared by every command that runs an analysis)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def add_device_options(p) -> None:
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    p.add_argument("--profile", default=None, metavar="PROFILE",
                   help="memory profile: '80 GB', '48 GB', '24 GB' or CPU (which models are quantised or offloaded; "
                        "`nemo doctor` names the one that fits this GPU); default: none, every model as loaded")


def load(ref: str, kind: str, args) -> Any:
    """A model by catalog id or <family>:<source>, with the command's --device/--dtype and --profile (the
    model's own options win over the profile's)."""
    from ..core.models.catalog import resolve_model_ref
    from ..core.models.families import LoadOptions, load_model

    spec = resolve_model_ref(ref, kind)
    settings = {"device": args.device, "dtype": args.dtype}
    profile_name = getattr(args, "profile", None)
    if profile_name:
        from ..core.models.profiles import get_profile

        spec, settings = get_profile(profile_name).apply(spec, kind, settings)  # an explicit --device wins
    return load_model(spec, LoadOptions(**settings))


def check_profile(args, refs: dict[str, tuple[str | None, str]]) -> None:
    """Refuse, before any model loads, a --profile whose models do not fit the GPU ({role: (ref, kind)});
    models outside the catalog have no size to add and are left out of the estimate, with a note."""
    profile_name = getattr(args, "profile", None)
    if not profile_name:
        return
    from ..core.base.errors import ConfigError
    from ..core.models.catalog import get_entry
    from ..core.base.device import gpu_info
    from ..core.models.profiles import check_fits, get_profile

    profile = get_profile(profile_name)
    entries = {}
    for role, (ref, kind) in refs.items():
        if not ref:
            continue
        try:
            entries[role] = get_entry(ref)
        except ConfigError:
            print(f"note: {ref} is not in the catalog; its memory is not in the '{profile.name}' estimate",
                  file=sys.stderr)
    gpus = gpu_info()
    check_fits(profile, entries, gpus[0]["total_bytes"] if gpus else None)


def default_editor_id() -> str:
    from ..core.base.errors import ConfigError
    from ..core.models.catalog import list_catalog

    editors = list_catalog("editor")
    chosen = next((e for e in editors if e.paper_default), editors[0] if editors else None)
    if chosen is None:
        raise ConfigError("No image editor is configured.", hint="Give one with --editor ID.")
    return chosen.id


def reference(ref: str, classifier, store, ctx):
    """An index id, a dataset (a folder, CSV or fiftyone:NAME, indexed now, incrementally) or 'none'."""
    if ref.lower() == "none":
        return None
    from ..core.data.reference_index import align_to_classifier, build_index, find_index

    from ..core.data.sources import is_fiftyone_ref

    path = Path(ref).expanduser()
    if path.exists() or is_fiftyone_ref(ref):  # a folder, a CSV manifest or a FiftyOne dataset (fiftyone:NAME)
        from ..core.data.datasets import open_dataset

        dataset = align_to_classifier(open_dataset(ref if is_fiftyone_ref(ref) else path), classifier,
                                      skip_unmatched=True)
        return build_index(dataset, classifier, store, ctx.sub("Reference index"))
    return find_index(store, ref)


def load_editor(spec, components, editor_ref: str | None, args):
    """The editor if the analysis uses one for this classifier (required ones default to the catalog's)."""
    need = spec.inputs.editor
    if components.zero_shot:
        if editor_ref:
            print("note: the classifier is zero-shot; hypotheses are tested by prompt rewriting, so the "
                  "editor is not used", file=sys.stderr)
        return None
    if need in ("required", "interventions"):
        return load(editor_ref or default_editor_id(), "editor", args)
    if need == "optional" and editor_ref:
        return load(editor_ref, "editor", args)
    return None


def load_wanted(spec, config, components, args) -> None:
    """Load what the analysis asks for beyond the user's models (e.g. ErrorRetrieval's joint-space embedder)."""
    from ..core.registry.build import wanted_components

    for role, (ref, kind) in wanted_components(spec, config, components).items():
        setattr(components, role, load(ref, kind, args))
