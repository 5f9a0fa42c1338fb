"""The application's working state outside Qt: the models in memory, the results store, the reference index.

Qt-free on purpose: the app holds one, and so does the model worker process (`core/app/worker`), which runs the
GPU lane's jobs when the settings ask for it. Every method that loads or runs a model is called from a job on
the GPU lane (one thread), so loads, unloads and runs never overlap; the GUI thread only reads `loaded()`,
which in worker mode is the worker's state as it last reported it (`remote`).

A model is named by a *ref*: a catalog id, `<family>:<source>` (see `catalog.resolve_model_ref`), or
`endpoint:<name>` for an OpenAI-compatible endpoint configured in the settings.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from nemo_desktop.core.base.errors import ConfigError, JobCancelled
from nemo_desktop.core.base.job_context import JobContext, null_context
from nemo_desktop.core.store.paths import AppPaths, get_paths

log = logging.getLogger(__name__)

KIND_TEXT = {"classifier": "classifier", "mllm": "captioning model (multimodal LLM)", "editor": "image editor"}
ENDPOINT_PREFIX = "endpoint:"
from nemo_desktop.core.models.catalog import ZERO_SHOT_FAMILIES  # noqa: E402 - re-exported for the panes


def leave_a_core_for_the_gui() -> None:
    """Let torch's CPU kernels use every core but one (once per process).

    By default torch runs each CPU operation on all cores; the window's thread then waits for a core and the
    interface stutters (measured: 100-200 ms pauses on 2 cores while a model generates). On a GPU the
    kernels run there and the CPU threads barely matter.
    """
    global _threads_set
    if _threads_set:
        return
    _threads_set = True
    import torch

    cores = os.cpu_count() or 1
    if cores > 1 and torch.get_num_threads() >= cores:
        torch.set_num_threads(cores - 1)
        log.info("torch CPU threads: %d of %d cores (one left for the window)", cores - 1, cores)


_threads_set = False


def warm_up_imports(ctx: JobContext) -> list[str]:
    """Import the core modules a diagnosis needs (methods, retrieval, reports) while the window is idle, and
    load the plugins; returns the skipped plugins, each by name with why (the window says so).

    Importing (and, after an update, compiling) them holds Python's GIL for long stretches; done at the start
    of the first diagnosis it stalls the window. None of them imports torch or another heavy library.
    """
    ctx.progress("Preparing", 0, None)
    from nemo_desktop.core.data import reference_index, retrieval  # noqa: F401
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.core import reports  # noqa: F401
    from nemo_desktop.core.models.families import list_families
    from nemo_desktop.core.base.plugins import plugin_problems

    list_methods()
    list_families()  # both registries have loaded their plugins (core/base/plugins.py) now
    return [p.describe() + f": {p.error}" for p in plugin_problems()]


def _facts_of(model: Any) -> dict:
    """What the window needs to know of a model it may not hold (worker mode): which model it is (the competency
    column matches stored estimators by id, revision and class names) and whether it classifies by prompts."""
    info = getattr(model, "info", None)
    names = getattr(model, "class_names", None)
    return {"model_id": getattr(info, "model_id", None), "revision": getattr(info, "revision", None),
            "class_names": list(names) if names is not None else None,
            "zero_shot": bool(getattr(model, "zero_shot", False))}


@dataclass
class LoadedModel:
    kind: str
    ref: str
    model: Any


_FROM_SETTINGS = object()  # ModelSession.load: the memory profile of the settings


def _catalog_entries(refs: dict[str, str | None]) -> dict[str, Any]:
    """{role: catalog entry} of the refs the catalog knows (an endpoint or a path has no size to add)."""
    from nemo_desktop.core.models.catalog import get_entry

    out = {}
    for role, ref in refs.items():
        try:
            out[role] = get_entry(ref) if ref else None
        except ConfigError:
            continue
    return {role: e for role, e in out.items() if e is not None}


class ModelSession:
    def __init__(self, paths: AppPaths | None = None):
        self.paths = paths or get_paths()
        self._models: dict[str, LoadedModel] = {}
        self._store = None
        self._store_lock = threading.Lock()
        self._settings_lock = threading.Lock()
        # The model worker's supervisor (core/app/worker) when the GPU lane runs in a separate process.
        self.remote = None
        # Called after every load / unload (the model worker reports its models to the app at once).
        self.on_change = None
        # How each model in memory was loaded ({kind: record}, see `wanted()`), so that a new model process can
        # load exactly the same models again after the last one died.
        self._records: dict[str, dict] = {}
        # Models a new process was asked to restore but could not ({kind: {"ref", "reason", ...}}): a job that
        # needs one fails naming it instead of loading the default in its place.
        self._unrestored: dict[str, dict] = {}

    # -- settings -------------------------------------------------------------------------------------
    def settings(self):
        from nemo_desktop.core.store.settings import load_settings

        return load_settings(self.paths)

    def update_settings(self, change) -> Any:
        """Load, apply `change(settings)`, validate and save atomically; serialised across threads."""
        from nemo_desktop.core.store.settings import save_settings

        with self._settings_lock:
            settings = self.settings()
            change(settings)
            save_settings(settings, self.paths)
            return settings

    def load_options(self):
        from nemo_desktop.core.models.families import LoadOptions

        s = self.settings()
        return LoadOptions(device=s.compute.device, dtype=s.compute.dtype, cpu_offload=s.compute.cpu_offload,
                           trust_remote_code=s.models.trust_remote_code)

    def profile_advice(self, name: str | None) -> dict:
        """The memory profile that fits this machine's GPU and whether `name` holds the models a diagnosis would
        use (those loaded, else the defaults): `core.models.profiles.advice`, for the Model manager."""
        from nemo_desktop.core.base.device import gpu_info
        from nemo_desktop.core.models.profiles import advice

        wanted = self.wanted_refs()
        refs = {kind: wanted.get(kind) or self.default_ref(kind) for kind in ("classifier", "mllm", "editor")}
        gpus = gpu_info()
        return advice(name, _catalog_entries(refs), gpus[0]["total_bytes"] if gpus else None)

    def _check_profile_fits(self, profile, kind: str, ref: str) -> None:
        """Refuse, before anything is released or loaded, a GPU profile that cannot hold `ref` beside the other
        models in memory (ConfigError in words, as the CLI's --profile)."""
        if profile.memory_gib is None:
            return
        from nemo_desktop.core.base.device import gpu_info
        from nemo_desktop.core.models.profiles import check_fits

        refs = {k: m.ref for k, m in self._models.items() if k != kind} | {kind: ref}
        gpus = gpu_info()
        check_fits(profile, _catalog_entries(refs), gpus[0]["total_bytes"] if gpus else None)

    def default_ref(self, kind: str) -> str | None:
        """The model used when none is loaded: the settings' default, else the catalog's paper default."""
        chosen = getattr(self.settings().models, kind, None)
        if chosen:
            return chosen
        from nemo_desktop.core.models.catalog import list_catalog

        return next((e.id for e in list_catalog(kind) if e.paper_default), None)

    def spec_for(self, kind: str, ref: str):
        from nemo_desktop.core.models.catalog import resolve_model_ref
        from nemo_desktop.core.models.families import ModelSpec

        if ref.startswith(ENDPOINT_PREFIX):
            if kind != "mllm":
                raise ConfigError(f"An OpenAI-compatible endpoint can only be the captioning model, not the {kind}.")
            name = ref[len(ENDPOINT_PREFIX):]
            endpoint = self.settings().endpoint(name)
            if endpoint is None:
                raise ConfigError(f"No endpoint named '{name}' in the settings.",
                                  hint="Add it in the Model manager under 'OpenAI-compatible endpoints'.")
            options = {"model": endpoint.model}
            if endpoint.api_key_ref:
                options["api_key"] = endpoint.api_key_ref
            return ModelSpec(kind="mllm", family="openai-compatible", source=endpoint.base_url, options=options,
                             catalog_id=ref)
        return resolve_model_ref(ref, kind)

    # -- models ---------------------------------------------------------------------------------------
    def loaded(self) -> dict[str, str]:
        """kind -> ref of every model in memory (read from the GUI thread): the worker process's models when
        the GPU lane runs there (`remote`), as it last reported them."""
        if self.remote is not None:
            return self.remote.loaded()
        return {kind: m.ref for kind, m in list(self._models.items())}

    def wanted_refs(self) -> dict[str, str]:
        """kind -> ref of the models the user has loaded, in memory or being (or failed to be) loaded again in a
        new model process: what a job uses, never the default in their place (read from the GUI thread)."""
        if self.remote is not None:
            return self.remote.wanted()
        return {kind: r["ref"] for kind, r in self.wanted().items()}

    def facts(self, kind: str) -> dict | None:
        """What the window may know of the current `kind` model without holding it: {"model_id", "revision",
        "class_names", "zero_shot"};
        None when none is loaded (in worker mode, as the worker last reported it)."""
        if self.remote is not None:
            return self.remote.facts().get(kind)
        m = self._models.get(kind)
        return None if m is None else _facts_of(m.model)

    def model_facts(self) -> dict[str, dict]:
        return {kind: _facts_of(m.model) for kind, m in list(self._models.items())}

    def get(self, kind: str) -> Any | None:
        m = self._models.get(kind)
        return m.model if m else None

    def put(self, kind: str, ref: str, model: Any) -> None:
        """Use an already built model (a script's own, or one loaded elsewhere) as the current `kind`."""
        self.unload(kind)
        self._unrestored.pop(kind, None)
        self._models[kind] = LoadedModel(kind, ref, model)
        self._records[kind] = {"kind": kind, "ref": ref, "restorable": False, **_facts_of(model)}
        self._changed()

    def wanted(self) -> dict[str, dict]:
        """What the user has asked to be loaded, {kind: record}: each model in memory with how it was loaded
        (ref, catalog kind, options, and the model's id, revision and class names), and each model a restore
        could not bring back ("unrestored": its reason). The model worker's supervisor keeps this, so that a new
        process loads exactly these again (`restore`)."""
        out = {kind: dict(r) for kind, r in self._records.items()}
        out.update({kind: dict(r) for kind, r in self._unrestored.items()})
        return out

    def unrestored(self, kind: str) -> dict | None:
        """The record of a `kind` model a new process could not load again (its "reason"), or None."""
        return self._unrestored.get(kind)

    def restore(self, records: dict[str, dict], ctx: JobContext | None = None) -> dict[str, list]:
        """Load exactly the models of `records` (`wanted()` of a process that died): the same ref, catalog kind
        and options, from the disk only, and the same revision. Never another model: one that cannot be loaded
        again is remembered as unrestored, and a job that needs it fails naming it (`ensure`, `preflight`).
        {"restored": [(kind, ref)], "failed": [(kind, ref, reason)]}."""
        from dataclasses import fields

        from nemo_desktop.core.models.families import LoadOptions

        ctx = ctx or null_context()
        out: dict[str, list] = {"restored": [], "failed": []}
        for kind, record in records.items():
            ref = record["ref"]
            reason = None  # one that failed before (its "reason") is tried again: its weights may be back
            if not record.get("restorable", True):
                reason = "it was handed to the model process as an object, not loaded from a reference"
            if reason is None:
                known = {f.name for f in fields(LoadOptions)}
                options = LoadOptions(**{k: v for k, v in (record.get("options") or {}).items() if k in known})
                try:
                    loaded = self.load(kind, ref, ctx, catalog_kind=record.get("catalog_kind"), local_only=True,
                                       options=options, profile=record.get("profile"))
                    now = _facts_of(loaded.model)
                    if record.get("revision") and now.get("revision") and now["revision"] != record["revision"]:
                        self.unload(kind)
                        reason = (f"its weights on disk changed since it was loaded (revision {record['revision']}, "
                                  f"now {now['revision']})")
                    elif record.get("class_names") is not None and now.get("class_names") is not None \
                            and list(now["class_names"]) != list(record["class_names"]):
                        self.unload(kind)
                        reason = "its classes on disk changed since it was loaded"
                except JobCancelled:
                    raise
                except Exception as exc:  # noqa: BLE001 - said in words: the job that needs it names the reason
                    reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            if reason is None:
                out["restored"].append((kind, ref))
                continue
            self._unrestored[kind] = {k: v for k, v in record.items() if k != "reason"} | {"reason": reason}
            out["failed"].append((kind, ref, reason))
            log.error("could not load the %s %s again after the model process restarted: %s", kind, ref, reason)
        if out["failed"]:
            self._changed()
        return out

    def _unrestored_error(self, kind: str):
        from nemo_desktop.core.base.errors import ModelNotRestoredError

        r = self._unrestored[kind]
        return ModelNotRestoredError(
            f"The {KIND_TEXT.get(kind, kind)} {r['ref']} could not be loaded again after the model process "
            f"restarted: {r['reason']}. Nothing was run with another model in its place.",
            hint="Load it again in the Model manager (or choose another model there), then run again.")

    def load(self, kind: str, ref: str, ctx: JobContext | None = None, catalog_kind: str | None = None,
             local_only: bool = False, options: Any = None, profile: Any = _FROM_SETTINGS) -> LoadedModel:
        """Load `ref` as the current model of `kind` (the previous one is released first). GPU lane only.
        `catalog_kind` names the catalog kind when the slot is a role (an 'embedder' is a classifier model);
        `local_only` never touches the network (restoring the last models at start must not download);
        `options` (LoadOptions) replaces the settings' (a restore loads with the options of the first load);
        `profile` the memory profile's name (default: the settings' one, checked to fit first; None: none)."""
        from nemo_desktop.core.models.profiles import get_profile
        from nemo_desktop.core.models.families import LoadOptions, load_model

        ctx = ctx or null_context()
        leave_a_core_for_the_gui()
        current = self._models.get(kind)
        if current is not None and current.ref == ref:
            return current
        spec = self.spec_for(catalog_kind or kind, ref)  # a bad ref fails before the old model is dropped
        if profile is _FROM_SETTINGS:
            profile = self.settings().compute.memory_profile
            if profile:  # a profile that cannot fit says so before the old model is dropped
                self._check_profile_fits(get_profile(profile), kind, ref)
        options = options if options is not None else self.load_options()
        if profile:
            from dataclasses import asdict as _fields

            spec, chosen = get_profile(profile).apply(spec, catalog_kind or kind, _fields(options))
            options = LoadOptions(**chosen)
        self.unload(kind)  # free its memory before the next one claims it
        ctx.progress(f"Loading the {KIND_TEXT.get(kind, kind)} {ref}", 0, None)
        try:
            if local_only:
                options.local_files_only = True
            model = load_model(spec, options)
        except Exception as exc:
            if ctx.cancelled:  # whatever the interrupted load raised, the user asked to stop: not an error
                raise JobCancelled(f"Loading the {KIND_TEXT.get(kind, kind)} {ref} was cancelled.") from None
            from nemo_desktop.core.base.device import translate_oom

            oom = translate_oom(exc, what=f"Loading the {KIND_TEXT.get(kind, kind)} {ref}")
            if oom is not None:  # say which load did not fit
                raise oom from exc
            raise
        ctx.check_cancelled()
        from dataclasses import asdict

        self._models[kind] = LoadedModel(kind, ref, model)
        self._unrestored.pop(kind, None)
        self._records[kind] = {"kind": kind, "ref": ref, "catalog_kind": catalog_kind, "restorable": True,
                               "options": asdict(options), "profile": profile or None, **_facts_of(model)}
        self._changed()
        log.info("loaded %s %s", kind, ref)
        return self._models[kind]

    def unload(self, kind: str) -> bool:
        self._records.pop(kind, None)
        if self._unrestored.pop(kind, None) is not None and kind not in self._models:
            self._changed()  # the user gave up the model that could not be restored: jobs may use the default
            return True
        m = self._models.pop(kind, None)
        if m is None:
            return False
        release = getattr(m.model, "unload", None)
        if callable(release):
            release()
        else:
            from nemo_desktop.core.base.device import free_memory

            free_memory()
        self._changed()
        log.info("unloaded %s %s", kind, m.ref)
        return True

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def classifier_is_zero_shot(self) -> bool:
        """Whether the classifier a method would use (in memory, else the default) is zero-shot, so that its
        interventions rewrite prompts and need no image editor."""
        loaded = self.facts("classifier") or self._unrestored.get("classifier")
        if loaded is not None:
            return bool(loaded.get("zero_shot"))
        ref = self.default_ref("classifier")
        try:
            from nemo_desktop.core.models.catalog import get_entry

            return ref is not None and get_entry(ref).family in ZERO_SHOT_FAMILIES
        except Exception:  # noqa: BLE001 - not a catalog id: assume an editor is needed
            return False

    def preflight(self, kinds) -> None:
        """Before a method starts: every model of `kinds` that is not in memory must be chosen and have its
        weights on disk. All problems are reported at once, from the cache alone (no network, well under a
        second), instead of the first one after loading the others or after a download's retries."""
        from nemo_desktop.core.base.errors import WeightsNotFoundError
        from nemo_desktop.core.models.catalog import get_entry
        from nemo_desktop.core.models.downloads import entry_status

        problems = []
        loaded = self.loaded()  # the model worker's, in worker mode
        for kind in kinds:
            if kind in loaded:
                continue
            if kind in self._unrestored:
                r = self._unrestored[kind]
                problems.append(f"the {KIND_TEXT.get(kind, kind)} {r['ref']} could not be loaded again after the "
                                f"model process restarted ({r['reason']}), and no other model is used in its place")
                continue
            ref = self.default_ref(kind)
            if ref is None:
                problems.append(f"no {KIND_TEXT.get(kind, kind)} is chosen")
                continue
            if ref.startswith(ENDPOINT_PREFIX):
                continue  # an endpoint: its own deadline (http_deadline) bounds the first request
            from nemo_desktop.core.models.family_extras import extra_for_ref

            extra = extra_for_ref(ref, kind)
            if extra:  # e.g. a diffusers editor without the 'editing' extra: said before anything loads
                problems.append(f"the {KIND_TEXT.get(kind, kind)} {ref} needs the '{extra}' extra "
                                f"(pip install 'nemo-desktop[{extra}]')")
                continue
            try:
                entry = get_entry(ref)
            except Exception:  # noqa: BLE001 - not a catalog id (family:source): its loader checks it
                continue
            status = entry_status(entry).status
            if status in ("not downloaded", "partial", "missing"):
                where = "missing on disk" if status == "missing" else status
                problems.append(f"the {KIND_TEXT.get(kind, kind)} {ref} is {where}")
        if problems:
            raise WeightsNotFoundError("This method cannot start: " + "; ".join(problems) + ".",
                                       hint="Download the models in the Model manager (or choose others there), "
                                            "then run again.")

    def ensure(self, kind: str, ctx: JobContext | None = None) -> Any:
        """The current model of `kind`, loading the default one if none is in memory. GPU lane only."""
        if kind in self._models:
            return self._models[kind].model
        if kind in self._unrestored:  # never the default in place of the model the user had loaded
            raise self._unrestored_error(kind)
        ref = self.default_ref(kind)
        if ref is None:
            raise ConfigError(f"No {KIND_TEXT.get(kind, kind)} is chosen.",
                              hint="Load one in the Model manager (select it, then Load).")
        return self.load(kind, ref, ctx).model

    # -- results store --------------------------------------------------------------------------------
    def store(self):
        """The results store, opened on first use (from any thread; the store serialises access)."""
        with self._store_lock:
            if self._store is None:
                from nemo_desktop.core.store import ResultsStore

                self._store = ResultsStore.open(self.paths)
            return self._store

    def reference_index(self, index_id: str | None, classifier: Any):
        """The reference index to retrieve from: `index_id`, or None for no observations."""
        if not index_id:
            return None
        from nemo_desktop.core.data.reference_index import ReferenceIndex

        index = ReferenceIndex.load(self.store(), index_id)
        if index.classifier_id != classifier.info.model_id:
            raise ConfigError(f"The reference index {index_id} was built with {index.classifier_id}, not with the "
                              f"current classifier {classifier.info.model_id}.",
                              hint="Index the dataset again with the current classifier (Dataset browser), or "
                                   "choose 'No observations'.")
        return index

    def close(self) -> None:
        for kind in list(self._models):
            self.unload(kind)
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None
