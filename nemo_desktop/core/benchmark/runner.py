"""`nemo bench run`: the NEMO benchmark over datasets x classifiers x MLLMs x editors x methods, resumable.

    summary = BenchmarkRunner(load_config("table1.toml"), store, shard=Shard.parse("1/4"), ctx=ctx).run()

1. Prepare, per classifier and dataset: the classifier as the benchmark evaluates it (datasets.adapt), a
   reference index over the dataset plus the ImageNet subset (one manifest; built incrementally, so a re-run
   only scans), and the seeded selection of misclassified images (selection.py). The selected images are
   misclassified, so retrieval (correct references only) never returns one of them: the index *is* the
   "rest of the dataset plus the ImageNet subset" of the paper.
2. Explain every (cell, sample) of this shard with the method from the registry, then let every judge score
   the explanation against the dataset's criterion (inline, or in a second pass with `judge_mode = "after"`
   so that local judge models need not share the GPU with the explainer).
3. Record each item in the store's run (records.py) as soon as it is finished.

Resuming after a crash or `kill -9`: items already `done` (or `failed`) are skipped without touching a model;
an item that was in flight is recomputed from the units its method had stored (SciTX stores every caption,
hypothesis, edit and score as it goes), and its judges' stored verdicts are reused. Writes are per item and
atomic, so nothing completed is lost and nothing is stored twice.

Sharding (`--shard i/n`): every shard prepares the same indexes and selections (deterministic), and takes
the samples at positions i-1, i-1+n, ... of each selection, so all methods of one image run in one shard
and share its cached units. `nemo bench merge` combines the shard stores (merge.py).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ..base.errors import ConfigError, JobCancelled, ModelError, NemoError, StoreError
from ..base.job_context import JobContext, Progress, describe_exception, null_context
from ..base.records import ExplanationResult
from .config import BenchConfig, DatasetConfig, ModelRef
from .datasets import Adapted, BenchmarkDataset, ImageNetSubset, open_benchmark_dataset, open_imagenet_subset
from .judge import Criterion, LLMMatchJudge, Verdict, custom_criterion, llm_match, load_criterion
from .model_pool import ModelPool, default_loader
from .records import (DONE, ERROR, EXPLAINED, FAILED, INCOMPLETE, RUN_KIND, SAMPLE_KIND, SELECTION_KIND, SHARD_KIND,
                      cell_id, item_id, load_artifacts, run_status)
from .selection import Outcome, select_misclassified, shard_of
from .work_units import Cell, Pair, RunSummary, Shard, _Eta

log = logging.getLogger(__name__)
PROGRESS_STAGE = "Benchmark"
_SHARD_RECORD_EVERY = 25  # computed items between two writes of the shard record


def _transient(exc: BaseException) -> bool:
    """Errors a re-run may not meet again (models, devices, networks), as opposed to a rejected sample."""
    return isinstance(exc, (ModelError, OSError, ConnectionError, TimeoutError, MemoryError)) or \
        not isinstance(exc, NemoError)


class BenchmarkRunner:
    def __init__(self, config: BenchConfig, store: Any, *, shard: Shard | None = None,
                 ctx: JobContext | None = None, loader: Callable[[ModelRef], Any] | None = None,
                 retry_failed: bool = False, run_id: str | None = None) -> None:
        self.config = config
        self.store = store
        self.shard = shard or Shard(0, 1)
        self.ctx = ctx or null_context()
        self.pool = ModelPool(loader or default_loader(config))
        self.retry_failed = retry_failed
        self.run_id = run_id or config.run_id
        self.summary = RunSummary(self.run_id, str(self.shard))
        self._items: dict[str, dict] = {}
        self._session = uuid.uuid4().hex[:12]
        self._started = time.time()
        self._eta = _Eta(0, 0)
        self._since_record = 0
        self._planned: set[str] = set()
        self._judge_objs: list[LLMMatchJudge] | None = None

    # ------------------------------------------------------------------------------------------- run
    def run(self) -> RunSummary:
        t0 = time.perf_counter()
        self._ensure_run()
        leftovers = self.store.cleanup_tmp()  # a run killed mid-write left these; its resume removes them
        if leftovers:
            log.info("removed %d temporary file(s) left by an interrupted write", leftovers)
        self._items = {it["item_id"]: it for it in self.store.run_items(self.run_id)}
        try:
            pairs = self._prepare()
            self.summary.prepare_s = time.perf_counter() - t0
            plan = [(pair, cell) for pair in pairs for cell in self._cells(pair)]
            self._planned = {item_id(cell.id, o.sample_id) for pair, cell in plan for o in pair.assigned}
            self.summary.total = len(self._planned)
            finished = sum(1 for pair, cell in plan for o in pair.assigned if self._finished(cell, o))
            self.summary.finished_before = finished
            self._eta = _Eta(self.summary.total, finished)
            self._report()
            inline = self.config.judge_mode == "inline"
            for pair in pairs:
                self._explain_pair(pair, judge=inline)
            if not inline and self.config.judges:
                self.pool.release("classifier", "mllm", "editor")
                for pair in pairs:
                    self._judge_pair(pair)
        except JobCancelled:
            self.summary.cancelled = True
            raise
        finally:
            self.summary.seconds = time.perf_counter() - t0
            self._final_statuses()
            self._write_shard_record(final=True)
            try:
                self.store.set_run_status(self.run_id, self._run_status())
            except StoreError:  # pragma: no cover - the run row was created above
                log.warning("could not update the status of run %s", self.run_id)
            self.pool.release()
        return self.summary

    def _ensure_run(self) -> None:
        run = self.store.get_run(self.run_id)
        config = {"name": self.config.name, "config": self.config.raw, "config_sha256": self.config.sha256,
                  "datasets": [d.label for d in self.config.datasets],
                  "classifiers": [c.label for c in self.config.classifiers],
                  "methods": [m.label for m in self.config.methods], "judges": [j.label for j in self.config.judges],
                  "tables": self.config.tables}
        if run is None:
            self.store.create_run(RUN_KIND, config, run_id=self.run_id)
        elif (run.get("config") or {}).get("config_sha256") != self.config.sha256:
            raise ConfigError(f"The run {self.run_id} in this store was made with another configuration.",
                              hint="Give this configuration its own run id (--run-id), or a new name.")
        self.store.set_run_status(self.run_id, "running")

    def _run_status(self) -> str:
        """The whole run's status: other shards may share this store (several GPUs, one machine)."""
        if self.summary.cancelled:
            return "cancelled"
        if self.shard.count == 1:
            return "complete" if self.summary.complete else ("empty" if not self.summary.total else "incomplete")
        return run_status(self.store, self.run_id)

    # --------------------------------------------------------------------------------------- prepare
    def _prepare(self) -> list[Pair]:
        cfg = self.config
        datasets = {d.label: self._open_dataset(d) for d in cfg.datasets}
        subset = None
        if cfg.imagenet_subset is not None:
            s = cfg.imagenet_subset
            subset = open_imagenet_subset(s.root, s.classes, s.per_class)
        pairs = []
        for clf_ref in cfg.classifiers:
            classifier = self.pool.get(clf_ref)
            zero_shot = bool(getattr(classifier, "zero_shot", False))
            self._check_editors(clf_ref, zero_shot)
            for d in cfg.datasets:
                self.ctx.check_cancelled()
                pairs.append(self._prepare_pair(d, datasets[d.label], clf_ref, classifier, zero_shot, subset))
        return pairs

    def _open_dataset(self, d: DatasetConfig) -> BenchmarkDataset:
        self.ctx.progress(f"Reading {d.label}", 0, None)
        ds = open_benchmark_dataset(d.kind, d.root, splits=d.splits, criterion=d.criterion, name=d.label)
        for note in ds.notes:
            self.summary.notes.append(f"{d.label}: {note}")
        return ds

    def _check_editors(self, clf_ref: ModelRef, zero_shot: bool) -> None:
        if zero_shot or self.config.editors:
            return
        from ..registry.methods import get_method

        needing = [m.label for m in self.config.methods if get_method(m.method).needs_editor]
        if needing:
            raise ConfigError(f"The classifier '{clf_ref.label}' is not zero-shot, so {', '.join(needing)} test "
                              "hypotheses by editing images, but the config lists no editors.",
                              hint="Add an [editors] entry (e.g. Kontext = \"flux-kontext-dev\").")

    def _criterion(self, d: DatasetConfig, ds: BenchmarkDataset) -> Criterion | None:
        if d.criterion:
            return custom_criterion(ds.display_name, d.criterion)
        if ds.criterion_key:
            return load_criterion(ds.criterion_key)
        if self.config.judges:
            raise ConfigError(f"The dataset '{d.label}' has no LLM Match criterion.",
                              hint="Give it a 'criterion' (the failure factor explanations should describe).")
        return None

    def _prepare_pair(self, d: DatasetConfig, ds: BenchmarkDataset, clf_ref: ModelRef, classifier: Any,
                      zero_shot: bool, subset: ImageNetSubset | None) -> Pair:
        from ..data.datasets import CsvManifestDataset
        from ..data.reference_index import build_index

        adapted = ds.adapt(classifier, aggregate=self.config.aggregate)
        view = adapted.classifier
        manifest = self._write_manifest(ds, adapted, view, subset)
        dataset = CsvManifestDataset(manifest, class_names=view.class_names)
        sub = self._forwarding_ctx(f"Indexing {d.label} with {clf_ref.label}")
        index = build_index(dataset, view, self.store, sub, batch_size=self.config.index_batch_size)
        by_path = {str(Path(s.path).resolve()): s for s in ds.samples}
        e = index.entries
        outcomes = [Outcome(by_path[p].sample_id, p, str(e.sha256[i]), int(e.labels[i]), int(e.preds[i]),
                            float(e.prob_label[i]), float(e.prob_pred[i]))
                    for i, p in enumerate(e.paths.tolist()) if p in by_path]
        unreadable = sum(1 for p in index.errors if p in by_path)
        n = self.config.samples_per_dataset if d.n is None else d.n
        selection = select_misclassified(outcomes, n, seed=self.config.seed, dataset=ds.kind,
                                         classifier=view.info.model_id)
        selection.dataset, selection.classifier = d.label, clf_ref.label
        if unreadable:
            selection.notes.append(f"{unreadable} unreadable image(s) were skipped")
        from ..store import result_key

        payload = {**selection.to_dict(), "index_id": index.index_id, "protocol": adapted.protocol,
                   "dataset_info": ds.describe(), "classifier_model": view.info.model_id,
                   "classifier_revision": view.info.revision}
        key = result_key(SELECTION_KIND, dataset=ds.describe(), classifier=view.info.model_id,
                         revision=view.info.revision, index_id=index.index_id, seed=self.config.seed, n=n,
                         fingerprint=selection.fingerprint())
        if not self.store.has(key):
            self.store.put(key, SELECTION_KIND, payload)
        pair = Pair(d, clf_ref, ds, zero_shot, index.index_id, selection, key, self._criterion(d, ds),
                    adapted.protocol)
        pair.assigned = [o for pos, o in enumerate(selection.selected) if shard_of(pos, self.shard.count) ==
                         self.shard.index]
        pair.sample_of = {o.path: by_path[o.path] for o in pair.assigned}
        self.summary.selections[f"{d.label}|{clf_ref.label}"] = {
            "key": key, "fingerprint": selection.fingerprint(), "selected": len(selection.selected),
            "misclassified": selection.n_misclassified, "images": selection.n_images,
            "accuracy": selection.accuracy, "assigned": len(pair.assigned), "index_id": index.index_id,
            "protocol": adapted.protocol, "notes": list(selection.notes)}
        return pair

    def _write_manifest(self, ds: BenchmarkDataset, adapted: Adapted, view: Any,
                        subset: ImageNetSubset | None) -> Path:
        """One CSV of the dataset plus the ImageNet subset, labelled in the view's class space. Its name is a
        hash of what determines it, so the reference index built from it is found again by every re-run."""
        from ..store import atomic_write_text

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "label"])
        for s, label in zip(ds.samples, adapted.labels):
            w.writerow([str(s.path), label])
        if subset is not None:
            for p, i in subset.items:
                label = adapted.from_imagenet(i)
                if label is not None:
                    w.writerow([str(p), label])
        ident = hashlib.sha256(json.dumps([ds.describe()["kind"], str(ds.root), getattr(ds, "splits", None),
                                           getattr(ds, "border_crop", 0),  # cropped pixels: another index
                                           subset.describe() if subset else None, view.info.model_id,
                                           view.info.revision, list(view.class_names)], sort_keys=True,
                                          default=str).encode("utf-8")).hexdigest()[:16]
        path = Path(self.store.store_dir) / "bench" / "manifests" / f"{ds.kind}-{ident}.csv"
        text = buf.getvalue()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        return path

    # ------------------------------------------------------------------------------------------ plan
    def _cells(self, pair: Pair) -> list[Cell]:
        mllms = [m.label for m in self.config.mllms] or [None]
        editors = [None] if pair.zero_shot else ([e.label for e in self.config.editors] or [None])
        return [Cell(pair.dataset_cfg.label, pair.classifier_ref.label, m, e, meth)
                for m in mllms for e in editors for meth in self.config.methods]

    def _finished(self, cell: Cell, outcome: Outcome, *, judging: bool = True) -> bool:
        it = self._items.get(item_id(cell.id, outcome.sample_id))
        if it is None:
            return False
        if it["status"] == DONE or (it["status"] == FAILED and not self.retry_failed):
            return True
        return not judging and it["status"] == EXPLAINED

    def _forwarding_ctx(self, prefix: str) -> JobContext:
        """A per-unit context: progress goes to the run's stage line, partial results are dropped (a run of
        thousands of samples must not accumulate them), cancellation is shared."""
        def forward(p: Progress) -> None:
            step = f"{p.stage} {p.done}/{p.total}" if p.total else p.stage
            self.ctx.progress(PROGRESS_STAGE, self._eta.done, self._eta.total or None,
                              f"{self._eta.text()} · {prefix}: {step}")

        return JobContext(on_progress=forward, cancel=self.ctx.cancel_token)

    def _report(self, note: str = "") -> None:
        self.ctx.progress(PROGRESS_STAGE, self._eta.done, self._eta.total or None,
                          self._eta.text() + (f" · {note}" if note else ""))

    # --------------------------------------------------------------------------------------- explain
    def _explain_pair(self, pair: Pair, *, judge: bool) -> None:
        cells = self._cells(pair)
        todo = [(c, o) for c in cells for o in pair.assigned if not self._finished(c, o, judging=judge)]
        if not todo:
            return
        classifier = self.pool.get(pair.classifier_ref)
        adapted = pair.dataset.adapt(classifier, aggregate=self.config.aggregate)  # sets zero-shot class names
        reference = None
        methods: dict[str, Any] = {}
        for cell in cells:
            outcomes = [o for c, o in todo if c is cell]
            for outcome in outcomes:
                self.ctx.check_cancelled()

                def build(cell=cell):
                    nonlocal reference
                    if cell.id not in methods:
                        if reference is None:
                            from ..data.reference_index import ReferenceIndex

                            reference = ReferenceIndex.load(self.store, pair.index_id)
                        methods[cell.id] = self._build_method(cell, adapted.classifier, reference, pair)
                    return methods[cell.id]

                self._process(pair, cell, outcome, build, judge=judge)

    def _build_method(self, cell: Cell, classifier: Any, reference: Any, pair: Pair | None = None) -> Any:
        from ..registry.methods import get_method
        from ..registry import Components, build_analysis, make_config
        from ..registry.params import config_params

        spec = get_method(cell.method.method)
        options = dict(cell.method.options)
        try:
            if any(p.name == "seed" for p in config_params(spec.config)):
                options.setdefault("seed", self.config.seed)
            config = make_config(spec, options)
        except ConfigError as exc:  # name the config's label: the user wrote the options under it
            raise ConfigError(f"Method '{cell.method.label}' ({cell.method.method}): {exc.message}",
                              hint=exc.hint) from None
        components = Components(classifier=classifier, store=self.store, reference=reference,
                                mllm=self.pool.get(self._ref(self.config.mllms, cell.mllm)) if cell.mllm else None,
                                editor=self.pool.get(self._ref(self.config.editors, cell.editor)) if cell.editor
                                else None)
        from ..registry.build import wanted_components

        first = self.config.editors[0].label if self.config.editors else None
        if self.config.editor_protocol == "rescore" and pair is not None and cell.editor not in (None, first):
            return self._rescorer(cell, pair, first, classifier, components.mllm, components.editor, config)
        for role, (ref, kind) in wanted_components(spec, config, components).items():
            # Its own pool slot, so an embedder never evicts the classifier under test.
            setattr(components, role, self.pool.get(ModelRef(f"{role}:{ref}", kind, ref), slot=role))
        return build_analysis(spec, components, config)

    def _rescorer(self, cell: Cell, pair: Pair, first: str, classifier: Any, mllm: Any, editor: Any,
                  config: Any) -> Any:
        """editor_protocol = "rescore": this cell tests again, with its editor, the explanation that the same
        method chose with the first editor (core/methods/rescore.py)."""
        from ..methods.intervention import InterventionSettings
        from ..methods.rescore import RescoredExplanation

        source_cell = cell_id(cell.dataset, cell.classifier, cell.mllm, first, cell.method.label)
        sample_of_path = {str(s.path): s.sample_id for s in pair.sample_of.values()}
        sample_of_path.update({str(Path(s.path).resolve()): s.sample_id for s in pair.sample_of.values()})

        def source(path: Path | None) -> ExplanationResult | None:
            sample_id = sample_of_path.get(str(path)) if path is not None else None
            if not sample_id:
                return None
            return self._stored_explanation(item_id(source_cell, sample_id), (EXPLAINED, DONE))

        settings = (InterventionSettings.from_config(config) if config is not None and hasattr(config, "edit_size")
                    else InterventionSettings(seed=self.config.seed))
        return RescoredExplanation(classifier, mllm, editor, store=self.store, settings=settings, source=source,
                                   source_label=f"cell '{source_cell}'")

    @staticmethod
    def _ref(refs: list[ModelRef], label: str) -> ModelRef:
        return next(r for r in refs if r.label == label)

    def _process(self, pair: Pair, cell: Cell, outcome: Outcome, build: Callable[[], Any], *, judge: bool) -> None:
        """One item: explanation (from the store if already explained), judges, record. Never raises for a
        failure of this item alone; cancellation and store errors propagate."""
        iid = item_id(cell.id, outcome.sample_id)
        sample = pair.sample_of[outcome.path]
        t0 = time.perf_counter()
        method_s = judge_s = 0.0
        result = self._stored_explanation(iid)
        # Building the method loads models: a failure there is the run's, not this item's, so it propagates.
        # Its time is loading, not per-item work, so it is counted apart.
        method = build() if result is None else None
        load_s = time.perf_counter() - t0
        self.summary.load_s += load_s
        try:
            if result is None:
                tm = time.perf_counter()
                result = method(sample.path, outcome.label, self._forwarding_ctx(f"{cell.id} {sample.sample_id}"))
                method_s = time.perf_counter() - tm
                self._ensure_stored(result, method)
                for stage, s in (result.timings or {}).items():
                    self.summary.stage_s[stage] = self.summary.stage_s.get(stage, 0.0) + float(s)
            if not (result.manifest or {}).get("complete", True):
                self._set_item(iid, result.result_key, INCOMPLETE,
                               {"message": "Some steps of the method failed; a re-run retries them.",
                                "hint": None, "detail": "; ".join(result.notes)})
                return
            if not judge:
                self._set_item(iid, result.result_key, EXPLAINED)
                return
            tj = time.perf_counter()
            try:
                verdicts = self._judge_all(pair, result)
            finally:
                judge_s = time.perf_counter() - tj
            key = self._finalize(pair, cell, sample, outcome, result, verdicts, method_s, judge_s)
            self._set_item(iid, key, DONE)
        except (JobCancelled, StoreError, ConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - this item fails; the run goes on
            log.warning("benchmark item %s failed", iid, exc_info=True)
            if result is not None and result.result_key and (result.manifest or {}).get("complete", True):
                status = EXPLAINED  # only the judging failed: keep the explanation
            else:
                status = ERROR if _transient(exc) else FAILED
            self._set_item(iid, result.result_key if result is not None else None, status, describe_exception(exc))
        finally:
            total = time.perf_counter() - t0
            self.summary.computed += 1
            self.summary.method_s += method_s
            self.summary.judge_s += judge_s
            self.summary.runner_s += max(0.0, total - load_s - method_s - judge_s)
            self._eta.add(total - load_s)
            self._report()
            self._since_record += 1
            if self._since_record >= _SHARD_RECORD_EVERY:
                self._write_shard_record(final=False)

    def _stored_explanation(self, iid: str, statuses: tuple[str, ...] = (EXPLAINED,)) -> ExplanationResult | None:
        """The explanation stored for item `iid` when its status is one of `statuses`; None otherwise."""
        it = self._items.get(iid)
        if it is None or it["status"] not in statuses or not it.get("result_key"):
            return None
        stored = self.store.get(it["result_key"])
        if stored is None:
            return None
        result = ExplanationResult.from_dict(stored.payload.get("result", stored.payload))
        result.result_key = stored.key
        return result

    def _ensure_stored(self, result: ExplanationResult, method: Any) -> None:
        """Methods normally store their result; one that does not gets it stored here."""
        if result.result_key and self.store.has(result.result_key):
            return
        from ..store import result_key

        payload = result.to_dict()
        key = result_key("explanation", method=result.method, image_sha256=result.sample.image_sha256,
                         true_index=result.sample.true_index, manifest=json.loads(json.dumps(result.manifest,
                                                                                             default=str)))
        artifacts = dict(getattr(method, "last_artifacts", {}) or {})
        result.result_key = key
        payload["result_key"] = key
        self.store.put(key, "explanation", payload, artifacts)

    def _set_item(self, iid: str, key: str | None, status: str, error: dict | None = None) -> None:
        self.store.add_run_item(self.run_id, iid, key, status, error)
        self._items[iid] = {"item_id": iid, "result_key": key, "status": status, "error": error}

    # ----------------------------------------------------------------------------------------- judge
    def _judges(self) -> list[LLMMatchJudge]:
        """The judges, loaded on first use (a run whose items are all explained already loads none)."""
        if self._judge_objs is None:
            self._judge_objs = [
                LLMMatchJudge(self.pool.get(j.model, slot=f"judge:{j.label}"), j.label, store=self.store,
                              max_attempts=j.max_attempts, max_new_tokens=j.max_new_tokens)
                for j in self.config.judges]
        return self._judge_objs

    def _judge_all(self, pair: Pair, result: ExplanationResult) -> list[Verdict]:
        if not self.config.judges or not result.explanation or pair.criterion is None:
            return []
        return [j.judge(result.explanation, pair.criterion) for j in self._judges()]

    def _judge_pair(self, pair: Pair) -> None:
        for cell in self._cells(pair):
            for outcome in pair.assigned:
                if self._finished(cell, outcome):
                    continue
                self.ctx.check_cancelled()
                iid = item_id(cell.id, outcome.sample_id)
                it = self._items.get(iid)
                if it is None or it["status"] != EXPLAINED:
                    continue  # not explained (an error in the first pass): the next run retries it
                if self._stored_explanation(iid) is None:  # the store was cleared meanwhile
                    self._set_item(iid, None, ERROR, {"message": "The stored explanation is missing; a re-run "
                                                                 "explains this sample again.", "hint": None,
                                                      "detail": None})
                    continue
                self._process(pair, cell, outcome, lambda: None, judge=True)

    # -------------------------------------------------------------------------------------- finalize
    def _finalize(self, pair: Pair, cell: Cell, sample: Any, outcome: Outcome, result: ExplanationResult,
                  verdicts: list[Verdict], method_s: float, judge_s: float) -> str:
        from ..store import result_key

        key = result_key(SAMPLE_KIND, explanation_key=result.result_key, verdicts=[v.key for v in verdicts],
                         cell=cell.as_dict(), sample_id=outcome.sample_id, selection=pair.selection_key)
        if self.store.has(key):
            return key
        judged = bool(self.config.judges)
        llm = None
        if judged:
            llm = {"score": llm_match(verdicts),
                   "judges": {v.judge: {"score": v.score, "status": v.status, "key": v.key,
                                        "attempts": len(v.replies)} for v in verdicts},
                   "failures": sum(1 for v in verdicts if v.status != "scored"),
                   "criterion": pair.criterion.key if pair.criterion else None}
            if not result.explanation:
                llm["note"] = "the method gave no explanation; nothing was judged"
        payload = {
            "result": result.to_dict(), "explanation_key": result.result_key, **cell.as_dict(),
            "sample_id": outcome.sample_id, "sample_path": str(sample.path), "split": sample.split,
            "true_index": outcome.label, "pred_index": outcome.pred, "llm_match": llm, "cei": result.cei,
            "selection_key": pair.selection_key, "protocol": pair.protocol,
            "timings": {"stages": dict(result.timings or {}), "method_wall_s": method_s, "judge_s": judge_s},
            "config_sha256": self.config.sha256,
        }
        stored = self.store.get(result.result_key) if result.result_key else None
        self.store.put(key, SAMPLE_KIND, payload, load_artifacts(stored) if stored is not None else None)
        return key

    # --------------------------------------------------------------------------------------- records
    def _final_statuses(self) -> None:
        counts: dict[str, int] = {}
        for it in self.store.run_items(self.run_id):
            if it["item_id"] in self._planned:
                counts[it["status"]] = counts.get(it["status"], 0) + 1
        missing = len(self._planned) - sum(counts.values())
        if missing > 0:
            counts["pending"] = missing
        self.summary.statuses = counts

    def _write_shard_record(self, *, final: bool) -> None:
        from ..store import result_key

        self._since_record = 0
        key = result_key(SHARD_KIND, run_id=self.run_id, shard=str(self.shard), session=self._session)
        payload = {"run_id": self.run_id, "shard": str(self.shard), "shard_index": self.shard.index,
                   "shard_count": self.shard.count, "session": self._session, "host": socket.gethostname(),
                   "pid": os.getpid(), "started": self._started, "updated": time.time(), "final": final,
                   "config_sha256": self.config.sha256, **self.summary.to_dict()}
        try:
            self.store.put(key, SHARD_KIND, payload)
        except StoreError:
            log.warning("could not write the shard record of run %s", self.run_id, exc_info=True)
