"""NEMO Desktop's Python API: the engine for notebooks and scripts, over the same registry and results store as
the app, the `nemo` CLI and the MCP server.

    import nemo_desktop as nemo

    nemo.list_models("classifier")                        # catalog entries (+ user ones) with download status
    clf = nemo.load_model("vit-b16-augreg2")              # a catalog id, or "<family>:<source>"
    preds = nemo.predict(["cat.jpg"], clf, top_k=3)       # Predictions: .to_dict(), .to_pandas()
    exp = nemo.explain("cat.jpg", "tabby cat", classifier=clf, mllm="qwen2.5-vl-7b", reference="none")
    exp.explanation, exp.cei, exp.images()                # the stored result, its evidence images
    exp.to_pandas()                                       # one row per candidate hypothesis
    exp.report("cat.html")                                # a self-contained HTML (or .pdf) report
    nemo.run_analysis("failure-modes", "<index id>", classifier=clf, mllm="...")   # any registered analysis
    nemo.get_result(exp.key)                              # any stored result, by key (or a unique prefix)
    nemo.per_image_table("digits/", "my-classifier")      # every stored fact per image, as a pandas DataFrame
    nemo.export_table("digits/", "t.parquet", "my-classifier")   # the same, streamed to .parquet/.csv/.jsonl
    nemo.export_fiftyone("digits/", "my-classifier", name="digits")   # a FiftyOne dataset (the fiftyone extra)

Long calls show tqdm progress bars (notebook widgets in Jupyter, text in a terminal; `progress=False` hides
them, a callable receives each `Progress`). Interrupting (Ctrl-C, or the notebook's stop button) cancels the
job: it stops at once, the steps it completed stay in the results store, and the same call resumes from them.
Errors are `nemo_desktop.core.base.errors.NemoError`s with a `.message` and a `.hint`, as the CLI prints them.

Models given by reference are loaded once per process and reused (`clear_models()` frees them); `device` and
`dtype` are as on the command line ("auto", "cpu", "cuda:1"; "auto", "float32", "float16", "bfloat16").
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from .core.base.errors import ConfigError, InputImageError, JobCancelled, NemoError
from .core.base.job_context import JobContext, Progress

if TYPE_CHECKING:  # types only: records import torch-free modules, pandas is the notebook extra
    import pandas

    from .core.base.records import Candidate, ExplanationResult, Observation, SampleInfo

R = TypeVar("R")

PathType = Union[str, "PathLike[str]"]
ProgressOption = Union[bool, Callable[[Progress], None]]

# The API's public names, listed here only: `nemo_desktop` (its lazy attributes, `__all__`, `dir()`) and its type
# stub `__init__.pyi` (a star import) read this list.
__all__ = ["ConfigError", "Explanation", "InputImageError", "JobCancelled", "NemoError", "Predictions", "Progress",
           "Result",
           "analyses", "clear_models", "explain", "export_report", "get_result", "index_dataset", "list_families",
           "list_indexes", "list_models", "list_plugins", "load_model", "methods", "per_image_table", "export_table",
           "export_fiftyone", "predict", "run_analysis"]


# -- models -------------------------------------------------------------------------------------------------------
_models: dict[tuple[str, str, str, str], Any] = {}
_models_lock = threading.Lock()


def list_models(kind: str | None = None) -> list[dict[str, Any]]:
    """The model catalog (shipped and user entries) with each model's on-disk status ('downloaded', 'missing',
    'partial', 'local', ...), size and VRAM estimate; `kind` is 'classifier', 'mllm', 'editor' or 'generator'."""
    from .core.models.catalog import list_catalog
    from .core.models.downloads import entry_status, resolve_cache_dir

    cache = resolve_cache_dir()
    return [{**e.to_dict(), **entry_status(e, cache).to_dict()}
            for e in sorted(list_catalog(kind), key=lambda e: (e.kind, e.id))]


def list_families(kind: str | None = None) -> list[dict[str, Any]]:
    """The model families (built in and from plugins) a `<family>:<source>` reference may name."""
    from .core.models.families import list_families as _families
    from .core.base.plugins import FAMILIES_GROUP, plugin_of

    out = []
    for k, name in _families(kind):
        plugin = plugin_of(FAMILIES_GROUP, f"{k}:{name}")
        out.append({"kind": k, "family": name, "plugin": (plugin.dist or plugin.name) if plugin else None})
    return out


def list_plugins() -> list[dict[str, Any]]:
    """Every plugin entry point found, loaded or skipped (with why)."""
    from .core.models.families import list_families as _families
    from .core.base.plugins import list_plugins as _plugins
    from .core.registry import list_analyses

    _families(), list_analyses()  # each registry loads its plugins on first use
    return [p.to_dict() for p in _plugins()]


def load_model(ref: Any, kind: str = "classifier", *, device: str = "auto", dtype: str = "auto") -> Any:
    """A model by catalog id or `<family>:<source>` (e.g. `timm:local-dir:/models/mine`), loaded once per process.
    A model object (already loaded) is returned as it is."""
    if not isinstance(ref, str):
        return ref
    key = (ref, kind, device, dtype)
    with _models_lock:
        if key in _models:
            return _models[key]
    from .core.models.catalog import resolve_model_ref
    from .core.models.families import LoadOptions, load_model as _load

    model = _load(resolve_model_ref(ref, kind), LoadOptions(device=device, dtype=dtype))
    with _models_lock:
        return _models.setdefault(key, model)


def clear_models() -> None:
    """Forget the models loaded by reference (their memory is freed when nothing else holds them)."""
    with _models_lock:
        _models.clear()


def methods() -> list[str]:
    """The explanation methods `explain` takes (plugins' included)."""
    from .core.registry.methods import list_methods

    return list_methods()


def analyses(kind: str | None = None) -> list[dict[str, Any]]:
    """Every registered analysis: name, kind, description, the components it needs, what it runs on, and its
    settings (name, type, default, help, range, choices)."""
    from .core.registry import get_analysis, list_analyses

    return [describe_analysis(get_analysis(n)) for n in list_analyses(kind)]


def describe_analysis(spec: Any) -> dict[str, Any]:
    from .core.registry.params import config_params

    return {"name": spec.name, "kind": spec.kind, "version": spec.version, "description": spec.description,
            "data": spec.inputs.data, "components": {r: spec.inputs.need(r) for r in spec.inputs.used()},
            "settings": [{"name": p.name, "type": p.form_kind, "default": p.default, "label": p.label,
                          "help": p.help, "minimum": p.minimum, "maximum": p.maximum,
                          "choices": list(p.choices) if p.choices else None}
                         for p in config_params(spec.config) if p.kind is not None]}


# -- jobs -------------------------------------------------------------------------------------------------------
class _Bars:
    """tqdm bars, one per stage (tqdm.auto: widgets in a notebook, text elsewhere)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._stage: str | None = None

    def __call__(self, p: Progress) -> None:
        from tqdm.auto import tqdm

        if p.stage != self._stage:
            self.close()
            self._stage = p.stage
            self._bar = tqdm(total=p.total, desc=p.stage, leave=False)
        if p.total is not None and self._bar.total != p.total:
            self._bar.total = p.total
        self._bar.update(max(0, p.done - self._bar.n))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._stage = None


@contextmanager
def job(progress: ProgressOption = True, ctx: JobContext | None = None) -> Iterator[JobContext]:
    """A JobContext for one API call. KeyboardInterrupt (Ctrl-C, a notebook's interrupt) cancels the job's token,
    so work in other threads and requests in flight stop too, then propagates."""
    from .core.base.job_context import cancel_scope

    if ctx is not None:  # the caller's (the MCP server's) context: its progress and cancellation
        with cancel_scope(ctx.cancel_token):
            yield ctx
        return
    display: Any = _Bars() if progress is True else None
    callback = display if display is not None else (progress if callable(progress) else None)
    ctx = JobContext(on_progress=callback)
    try:
        with cancel_scope(ctx.cancel_token):
            yield ctx
    except KeyboardInterrupt:
        ctx.cancel_token.cancel()
        raise
    finally:
        if display is not None:
            display.close()


@contextmanager
def _store(store: Any = None) -> Iterator[Any]:
    if store is not None:
        yield store
        return
    from .core.store import ResultsStore
    from .core.store.paths import get_paths

    opened = ResultsStore.open(get_paths().ensure())
    try:
        yield opened
    finally:
        opened.close()


# -- results ------------------------------------------------------------------------------------------------------
class Result(Generic[R]):
    """A stored analysis result: `.key` (its results-store key), `.kind`, `.analysis`, `.record` (the result
    object: an ExplanationResult, a FailureModesResult, ...), `.to_dict()`, `.to_pandas()`, `.images()` and
    `.report(path)`. Attributes of the record read through (`exp.explanation`, `exp.cei`, `exp.candidates`);
    `explain()` returns an `Explanation`, whose fields are typed."""

    record: R
    key: str  # the results-store key ("" only for a result that was not stored)
    kind: str
    analysis: str | None

    def __init__(self, record: R, key: str | None = None, kind: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        self.record = record
        self._data = data
        self.key = str(key or getattr(record, "key", None) or getattr(record, "result_key", None) or "")
        self.kind: str = kind or str(getattr(record, "kind", "result"))
        self.analysis: str | None = getattr(record, "analysis", None) or (data or {}).get("method")

    def __getattr__(self, name: str) -> Any:
        record = self.__dict__.get("record")
        if record is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(record, name)

    def __repr__(self) -> str:
        what = self.analysis or self.kind
        text = getattr(self.record, "explanation", None)
        return f"<nemo Result {what} key={(self.key or '-')[:12]}" + (f": {text!r}>" if text else ">")

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON-ready data (what the store, the CLI's --json and the MCP server give)."""
        if self._data is not None:
            return dict(self._data)
        return self.record.to_dict() if hasattr(self.record, "to_dict") else dict(self.record)

    def to_pandas(self) -> pandas.DataFrame:
        """A pandas DataFrame: one row per candidate hypothesis for an explanation, else the result flattened
        (`pandas.json_normalize`). Needs pandas (`pip install pandas`)."""
        pd = _pandas()
        data = self.to_dict()
        if isinstance(data.get("candidates"), list) and "sample" in data:
            rows = [{"rank": i + 1, "selected": i == data.get("selected_index"), "hypothesis": c.get("hypothesis"),
                     "intervention": c.get("intervention"), "cei": c.get("cei"),
                     "p_true_before": c.get("prob_true_before"), "p_true_after": c.get("prob_true_after"),
                     "edit_verdict": c.get("edit_verdict"), "error": c.get("error")}
                    for i, c in enumerate(data["candidates"])]
            if not rows and data.get("explanation"):
                rows = [{"rank": 1, "selected": True, "hypothesis": data["explanation"], "cei": data.get("cei")}]
            return pd.DataFrame(rows)
        return pd.json_normalize(data)

    def images(self, store: Any = None) -> dict[str, Path]:
        """The result's stored images (evidence, edited images, the input copy) by artifact name -> file path."""
        if not self.key:
            return {}
        with _store(store) as s:
            stored = s.get(self.key)
            return dict(stored.artifacts) if stored is not None else {}

    def report(self, path: PathType, format: str | None = None, *, store: Any = None,
               progress: ProgressOption = False) -> Path:
        """Write this result's self-contained HTML or PDF report to `path` (format from the suffix by default)."""
        if not self.key:
            raise ConfigError("This result is not stored, so it has no report.", hint="Run it with a results store.")
        return export_report(self.key, path, format, store=store, progress=progress)


class Explanation(Result["ExplanationResult"]):
    """`explain()`'s answer: a stored Result whose record is an ExplanationResult, its fields typed."""

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def sample(self) -> SampleInfo:
        return self.record.sample

    @property
    def explanation(self) -> str | None:
        """The selected natural-language explanation (None when no candidate was selected)."""
        return self.record.explanation

    @property
    def cei(self) -> float | None:
        return self.record.cei

    @property
    def selected_index(self) -> int | None:
        return self.record.selected_index

    @property
    def candidates(self) -> list[Candidate]:
        return self.record.candidates

    @property
    def observations(self) -> list[Observation]:
        return self.record.observations

    @property
    def notes(self) -> list[str]:
        return self.record.notes


def _result(record: Any, **kw: Any) -> Result[Any]:
    """An Explanation for an explanation record, else a Result."""
    from .core.base.records import ExplanationResult

    return Explanation(record, **kw) if isinstance(record, ExplanationResult) else Result(record, **kw)


class Predictions(list):
    """`predict`'s answer: one dict per image ({"image", "top_k": [{"rank", "index", "name", "probability"}]} or
    {"image", "error"}), plus `.classifier` (its id, family, revision) and `.to_dict()` / `.to_pandas()`."""

    classifier: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"classifier": self.classifier, "results": list(self)}

    def to_pandas(self) -> pandas.DataFrame:
        """One row per (image, rank)."""
        pd = _pandas()
        return pd.DataFrame([{"image": r["image"], **t} for r in self for t in r.get("top_k", [])])


def _pandas() -> Any:  # the module (typed as pandas where it is returned)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("to_pandas() needs pandas.", hint="pip install pandas") from None
    return pd


def get_result(key: str, *, store: Any = None) -> Result[Any]:
    """A stored result by key, or by a unique key prefix (at least 4 characters)."""
    from .core.reports import resolve_target

    with _store(store) as s:
        kind, ident = resolve_target(s, key)
        if kind == "run":
            raise ConfigError(f"'{key}' is a run, not a result.", hint="Pass a result key.")
        stored = s.get(ident)
        if stored is None:  # pragma: no cover - resolve_target found it
            raise ConfigError(f"No stored result '{key}'.")
        record = None
        if stored.kind == "explanation":
            from .core.base.records import ExplanationResult

            try:
                record = ExplanationResult.from_dict(stored.payload)
            except Exception:  # noqa: BLE001 - an older payload: the plain data still serves
                record = None
        return _result(record if record is not None else stored.payload, key=ident, kind=stored.kind,
                       data=stored.payload)


def export_report(key_or_run: str, path: PathType, format: str | None = None, *, store: Any = None,
                  image_format: str | None = None, progress: ProgressOption = False,
                  ctx: JobContext | None = None) -> Path:
    """Write the HTML or PDF report of a stored result or a whole run to `path`; returns the path written."""
    from .core.reports import export_report as _export, resolve_target

    out = Path(path).expanduser()
    fmt = format or (out.suffix.lower().lstrip(".") if out.suffix.lower() in (".html", ".pdf") else "html")
    if fmt not in ("html", "pdf"):
        raise ConfigError(f"A report is html or pdf, not '{fmt}'.")
    if not out.parent.is_dir():
        raise ConfigError(f"The folder {out.parent} does not exist.", hint="Create it, or choose another path.")
    with _store(store) as s, job(progress, ctx) as jctx:
        _, ident = resolve_target(s, key_or_run)
        return Path(_export(ident, s, fmt, out, image_format=image_format, ctx=jctx))


# -- reference indexes -------------------------------------------------------------------------------------------
def list_indexes(*, store: Any = None) -> list[dict[str, Any]]:
    """The reference indexes in the results store (id, dataset folder, classifier, entries, correct), newest first:
    what `explain(reference=...)` and the index-based analyses (failure modes) take."""
    from .core.data.reference_index import ReferenceIndex

    with _store(store) as s:
        return ReferenceIndex.list(s)


def index_dataset(dataset: PathType, classifier: Any, *, device: str = "auto", dtype: str = "auto",
                  store: Any = None, progress: ProgressOption = True, ctx: JobContext | None = None
                  ) -> dict[str, Any]:
    """Index a dataset (a folder with one sub-folder per class, or a CSV manifest) with `classifier`: every
    image's prediction and embedding, stored; incremental (a re-run indexes only new images). Returns the index'
    summary, whose `index_id` the index-based analyses and `explain(reference=...)` take."""
    from .core.data.datasets import open_dataset
    from .core.data.reference_index import ReferenceIndex, align_to_classifier, build_index

    from .core.data.sources import is_fiftyone_ref

    path = str(dataset) if is_fiftyone_ref(dataset) else Path(dataset).expanduser()
    if not is_fiftyone_ref(dataset) and not Path(path).exists():
        raise ConfigError(f"No dataset at {path}.", hint="Give a folder of class sub-folders, a CSV manifest or "
                                                         "fiftyone:NAME.")
    clf = load_model(classifier, "classifier", device=device, dtype=dtype)
    with _store(store) as s, job(progress, ctx) as jctx:
        index = build_index(align_to_classifier(open_dataset(path), clf, skip_unmatched=True), clf, s, jctx)
        summary = dict(next((r for r in ReferenceIndex.list(s) if r["index_id"] == index.index_id),
                            {"index_id": index.index_id, "entries": len(index)}))
        build = getattr(index, "last_build", None)
        summary["unreadable"] = dict(build.errors) if build is not None else {}  # path -> why it is not indexed
        return summary


# -- findings where users look ------------------------------------------------------------------------------------
def per_image_table(dataset: PathType, classifier: str | None = None, *, competency: str | None = None,
                    failure_modes: str | None = None, fix: str | None = None, store: Any = None) -> Any:
    """One row per image of an indexed dataset (a folder, CSV, fiftyone:NAME or an index id) for `classifier` (the
    id it was indexed with; needed when several were), with every fact the results store holds for it, as a pandas
    DataFrame with nullable dtypes; a missing fact is <NA>. Columns: docs/per-image-table.md. `competency`,
    `failure_modes` and `fix` name the stored results to use (default: the newest of this dataset and classifier)."""
    from .core.export.table import PerImageTable

    _pandas()
    with _store(store) as s:
        return PerImageTable.open(s, dataset, classifier, competency_key=competency, failure_modes_key=failure_modes,
                                  fix_key=fix).to_pandas()


def export_table(dataset: PathType, path: PathType, classifier: str | None = None, *, format: str | None = None,
                 competency: str | None = None, failure_modes: str | None = None, fix: str | None = None,
                 store: Any = None, progress: ProgressOption = True, ctx: JobContext | None = None) -> dict[str, Any]:
    """per_image_table written to `path` (.parquet, .csv or .jsonl) in batches, never holding the rows; returns the
    file, its row count and metadata."""
    from .core.export.table import PerImageTable

    with _store(store) as s, job(progress, ctx) as jctx:
        table = PerImageTable.open(s, dataset, classifier, competency_key=competency, failure_modes_key=failure_modes,
                                   fix_key=fix)
        return table.write(Path(path).expanduser(), fmt=format, ctx=jctx)


def export_fiftyone(dataset: PathType, classifier: str | None = None, *, name: str, competency: str | None = None,
                    failure_modes: str | None = None, fix: str | None = None, visualization: str | None = None,
                    store: Any = None, progress: ProgressOption = True, ctx: JobContext | None = None
                    ) -> dict[str, Any]:
    """Create or update (matching samples by file path) the FiftyOne dataset `name` with the per-image facts: labels,
    nemo_* fields, failure modes as tags and saved views, the embeddings as a brain visualization. Needs the
    'fiftyone' extra; open it with `fiftyone.launch_app(fiftyone.load_dataset(name))`."""
    from .core.base.extras import require

    require("fiftyone", "export_fiftyone()")
    from .core.export.fiftyone_export import export_to_fiftyone

    with _store(store) as s, job(progress, ctx) as jctx:
        return export_to_fiftyone(s, dataset, classifier, name=name, competency_key=competency,
                                  failure_modes_key=failure_modes, fix_key=fix, visualization=visualization, ctx=jctx)


# -- running -------------------------------------------------------------------------------------------------------
def predict(images: PathType | Sequence[PathType], classifier: Any, *, top_k: int = 5, device: str = "auto",
            dtype: str = "auto", progress: ProgressOption = True, ctx: JobContext | None = None) -> Predictions:
    """The classifier's top-k classes for each image. An unreadable image gets {"image", "error"}; when none can
    be read, InputImageError."""
    import numpy as np

    from .core.base.images import load_image
    from .core.models.outputs import predict_with_embeddings

    if top_k < 1:
        raise ConfigError("top_k must be at least 1.")
    paths = [images] if isinstance(images, (str, PathLike)) else list(images)
    if not paths:
        raise ConfigError("No images were given.")
    loaded, failures = [], []
    with job(progress, ctx) as jctx:
        for path in jctx.track(paths, "Reading images"):
            try:
                loaded.append((str(path), load_image(path)))
            except InputImageError as exc:
                failures.append((str(path), exc))
        if not loaded:
            if len(failures) == 1:
                raise failures[0][1]
            raise InputImageError(f"None of the {len(failures)} images could be read.",
                                  hint="; ".join(f"{p}: {e.message}" for p, e in failures))
        clf = load_model(classifier, "classifier", device=device, dtype=dtype)
        step = max(1, int(getattr(clf, "batch_size", 32) or 32))
        probs = []
        jctx.progress("Classifying", 0, len(loaded))
        for start in range(0, len(loaded), step):
            jctx.check_cancelled()
            p, _ = predict_with_embeddings(clf, [im for _, im in loaded[start:start + step]])
            probs.append(p)
            jctx.progress("Classifying", min(len(loaded), start + step), len(loaded))
    table = np.concatenate(probs, axis=0)
    k = min(top_k, table.shape[1])
    out = Predictions()
    for (path, _), row in zip(loaded, table):
        top = np.argsort(-row, kind="stable")[:k]
        out.append({"image": path, "top_k": [{"rank": r + 1, "index": int(i), "name": clf.class_names[i],
                                              "probability": float(row[i])} for r, i in enumerate(top)]})
    out.extend({"image": p, "error": e.to_dict()} for p, e in failures)
    info = clf.info
    out.classifier = {"model_id": info.model_id, "family": info.family, "revision": info.revision,
                      "num_classes": len(clf.class_names)}
    return out


def _reference(ref: Any, classifier: Any, store: Any, ctx: JobContext) -> Any:
    """A reference index: an index object, an index id, a dataset folder or manifest (indexed now), or None."""
    if ref is None or (isinstance(ref, str) and ref.lower() == "none"):
        return None
    if not isinstance(ref, (str, PathLike)):
        return ref
    from .core.data.reference_index import align_to_classifier, build_index, find_index

    path = Path(ref).expanduser()
    if path.exists():
        from .core.data.datasets import open_dataset

        dataset = align_to_classifier(open_dataset(path), classifier, skip_unmatched=True)
        return build_index(dataset, classifier, store, ctx.sub("Reference index"))
    return find_index(store, str(ref))


def run_analysis(name: str, data: Any = None, *, classifier: Any = None, classifier_b: Any = None, mllm: Any = None,
                 editor: Any = None, embedder: Any = None, judge: Any = None, generator: Any = None,
                 reference: Any = None, fitted: Any = None, settings: Mapping[str, Any] | None = None,
                 device: str = "auto", dtype: str = "auto", store: Any = None, progress: ProgressOption = True,
                 ctx: JobContext | None = None, call_args: Sequence[Any] | None = None) -> Result[Any]:
    """Run any registered analysis (`analyses()` lists them with their settings) on `data`: an image for a
    per-sample method (then give `call_args=(image, true_label)` or use `explain`), a run id, an index id or a
    dataset folder for the dataset analyses, nothing for those whose components say it all. Models are given by
    reference or as loaded objects; `settings` are the analysis' options by name (unknown ones are refused).
    `generator` (model differences) is a condition source: 'digits', 'digits-ink', 'dataset:FILE.csv' or
    't2i:MODEL[@conditions.json]', or an object."""
    from .core.registry import Components, build_analysis, get_analysis, make_config
    from .core.registry.build import wanted_components
    from .core.registry.data_inputs import ROLE_CATALOG_KIND
    from .core.registry.data_inputs import call_args as _call_args

    spec = get_analysis(name)
    config = make_config(spec, dict(settings or {}))  # unknown options and bad ranges fail before any load
    given = {"classifier": classifier, "classifier_b": classifier_b, "mllm": mllm, "editor": editor,
             "embedder": embedder, "judge": judge, "generator": generator}
    args = tuple(call_args) if call_args is not None else _call_args(spec, None if data is None else str(data))
    with _store(store) as s, job(progress, ctx) as jctx:
        components = Components(store=s, fitted=fitted)
        for role, ref in given.items():
            if ref is None:
                continue
            if role == "generator":  # a condition source: digits, digits-ink, dataset:CSV, t2i:MODEL[@FILE]
                if isinstance(ref, str):
                    from .core.analyses.model_diff.sources import open_condition_source

                    ref = open_condition_source(ref, lambda m: load_model(m, "generator", device=device,
                                                                          dtype=dtype))
                components.generator = ref
                continue
            setattr(components, role, load_model(ref, ROLE_CATALOG_KIND.get(role, "classifier"), device=device,
                                                 dtype=dtype))
        for role, (ref, kind) in wanted_components(spec, config, components).items():
            setattr(components, role, load_model(ref, kind, device=device, dtype=dtype))
        if reference is not None and spec.inputs.reference != "none":
            components.reference = _reference(reference, components.classifier, s, jctx)
        if spec.inputs.data == "index" and args and isinstance(args[0], (str, PathLike)):
            from .core.data.reference_index import find_index

            args = (find_index(s, str(args[0]), components.classifier), *args[1:])  # an index id -> the index
        analysis = build_analysis(spec, components, config)
        record = analysis(*args, jctx)
    return _result(record)


def explain(image: PathType, true_label: str | int, *, classifier: Any, mllm: Any = None, editor: Any = None,
            reference: Any = None, method: str = "scitx", validate: bool = False,
            settings: Mapping[str, Any] | None = None, device: str = "auto", dtype: str = "auto",
            store: Any = None, progress: ProgressOption = True, ctx: JobContext | None = None) -> Explanation:
    """Explain why `classifier` got `image` wrong (its true class `true_label`, a name or an index) with an
    explanation method (`methods()`: SciTX by default, the paper's baselines, plugins), and test each hypothesis.

    `reference`: an index id, a dataset folder (indexed first), or None/"none" for no observations. An image
    editor is loaded when the method tests hypotheses by editing and the classifier is not zero-shot (`editor`,
    else the catalog's paper default). `validate`: a baseline's validated variant (SciTX always validates).
    Returns the stored Result (`.explanation`, `.cei`, `.candidates`, `.images()`, `.report(path)`)."""
    from .core.methods.labels import resolve_label
    from .core.registry.methods import get_method, list_methods
    from .core.methods.validation import VALIDATED_SUFFIX

    path = Path(image).expanduser()
    if not path.is_file():
        raise ConfigError(f"No image file at {path}.", hint="Check the path.")
    name = method
    if validate and method != "scitx" and not method.endswith(VALIDATED_SUFFIX):
        if method + VALIDATED_SUFFIX not in list_methods():
            raise ConfigError(f"The method '{method}' has no validated variant.",
                              hint=f"Known methods: {', '.join(list_methods())}.")
        name = method + VALIDATED_SUFFIX
    spec = get_method(name)
    if mllm is None and (spec.inputs.mllm == "required" or spec.needs_editor):
        raise ConfigError(f"The method {spec.name} needs a multimodal LLM.",
                          hint="Give mllm=: a catalog id (nemo.list_models('mllm')) or <family>:<source>.")
    if reference is None and spec.inputs.reference == "required":
        raise ConfigError(f"The method {spec.name} needs a reference (an index id or a dataset folder).")
    clf = load_model(classifier, "classifier", device=device, dtype=dtype)
    resolve_label(true_label, clf.class_names)  # a typo fails before the big models load
    if editor is None and spec.needs_editor and not getattr(clf, "zero_shot", False):
        from .core.models.catalog import list_catalog

        editors = list_catalog("editor")
        chosen = next((e for e in editors if e.paper_default), editors[0] if editors else None)
        if chosen is None:
            raise ConfigError("No image editor is configured.", hint="Give one with editor=.")
        editor = chosen.id
    if getattr(clf, "zero_shot", False) or spec.inputs.editor == "none":
        editor = None
    result = run_analysis(spec.name, classifier=clf, mllm=mllm, editor=editor, reference=reference,
                          settings=settings, device=device, dtype=dtype, store=store, progress=progress, ctx=ctx,
                          call_args=(path, true_label))
    if not isinstance(result, Explanation):  # a plugin method's own record type
        raise NemoError(f"The method {spec.name} returned {type(result.record).__name__}, not an explanation.")
    return result
