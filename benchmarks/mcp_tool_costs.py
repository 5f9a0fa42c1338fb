"""What each `nemo mcp` tool costs: wall seconds (cold, warm) and GPU memory of the tool's work, with the real
default models' architectures (random weights: this machine's models and the GPU machine have no checkpoints).

    PYTHONPATH=. python benchmarks/mcp_tool_costs.py --device cuda --out mcp_tool_costs.json
    PYTHONPATH=. python benchmarks/mcp_tool_costs.py --device cpu --tiny --out /tmp/costs.json   # smoke test

Each tool's work is the function the tool calls (`nemo_desktop.api`: predict, explain, index_dataset, run_analysis,
get_result, export_report, list_*), given the models as loaded objects, so the figures are the engine's; the MCP
transport adds a JSON round trip on top (milliseconds). Cold: the first call in the process (lazy imports, CUDA
kernel selection); warm: the same call again on a FRESH results store, so it is recomputed (an MCP re-run of the
same input is answered from the store in milliseconds instead). GPU memory: `torch.cuda.max_memory_allocated`,
reset before each call; "work GiB" is that peak minus what was allocated before the call (the models of every
tool stay resident, so the peak alone would mostly count the other tools' models), and "models GiB" is the
parameters of the models the tool uses. A tool's GPU need is models + work.

Models (bf16 on a GPU; `--tiny`: the same builders at toy sizes, fp32, for the smoke test):
  * classifier: the catalog default vit-b16-augreg2's architecture, timm vit_base_patch16_224 (1000 classes);
  * zero-shot classifier / embedder: the catalog's clip-vit-b32, transformers CLIPModel(CLIPConfig()) (whose
    defaults are openai/clip-vit-base-patch32's) with a small BPE tokenizer trained here (only ids reach the model);
  * MLLM: the catalog default qwen2.5-vl-7b's architecture (benchmarks/scitx_gpu.py: its published config.json),
    NEMO's TransformersMLLM adapter. Random weights never stop: every reply runs to its token cap (an upper bound
    of generation time), and replies that must be JSON are swapped for fixed valid ones AFTER the model has
    generated its full reply (scitx_gpu.JsonAfterGenerating), so the generation cost is real;
  * editor: the catalog default flux-kontext-dev's architecture (diffusers); without diffusers the tools that need
    an editor (SciTX explain on a non-zero-shot classifier, an edit fix) are skipped with that reason.
Settings are the defaults except where a row's "settings" says otherwise (fewer epochs or images, to keep the
whole run under 4 minutes on one H100); each row says what it ran on (n images).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import _tiny_models  # noqa: E402  (the benchmarks' image folders)
import scitx_gpu as G  # noqa: E402  (the published configs and NEMO-adapter builders)


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules (None) has no spec
        return False


@dataclass
class Row:
    tool: str
    model: str  # what it ran with
    data: str = ""  # what it ran on (n)
    settings: dict[str, Any] = field(default_factory=dict)
    cold_s: float | None = None
    warm_s: float | None = None
    peak_gib: float | None = None
    work_gib: float | None = None
    models_gib: float | None = None
    skipped: str | None = None
    error: str | None = None
    note: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        import torch

        self.args, self.root = args, root
        self.cuda = args.device.startswith("cuda")
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        self.rows: list[Row] = []
        self.builds: dict[str, float] = {}
        self._stores = 0

    # -- measuring ------------------------------------------------------------------------------------------
    def store(self):
        from nemo_desktop.core.store import ResultsStore

        self._stores += 1
        d = self.root / f"store-{self._stores}"
        return ResultsStore.open(db_path=d / "results.sqlite", artifacts_dir=d / "artifacts")

    def _sync(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize()

    def _once(self, fn: Callable[[Any], Any], prepare: Callable[[Any], Any] | None = None
              ) -> tuple[float, float | None, float | None, Any]:
        import torch

        store = self.store()
        if prepare is not None:  # what the tool's input needs in the store (not timed)
            prepare(store)
        self._sync()
        before = torch.cuda.memory_allocated() if self.cuda else 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        try:
            out = fn(store)
            self._sync()
        finally:
            seconds = time.perf_counter() - t
        if not self.cuda:
            return seconds, None, None, (out, store)
        peak = torch.cuda.max_memory_allocated()
        return seconds, peak / 2**30, (peak - before) / 2**30, (out, store)

    def measure(self, row: Row, fn: Callable[[Any], Any], models: tuple = (), warm: bool = True,
                prepare: Callable[[Any], Any] | None = None) -> Any:
        """Run `fn(store)` cold and (with `warm`) again on a fresh store (`prepare(store)` first, untimed);
        returns (result, store) of the first run, or None when it failed."""
        row.models_gib = round(sum(_param_bytes(m) for m in models) / 2**30, 3) if models else 0.0
        try:
            row.cold_s, peak, work, first = self._once(fn, prepare)
            if warm:
                row.warm_s, peak2, work2, _ = self._once(fn, prepare)
                if peak is not None:
                    peak, work = max(peak, peak2), max(work, work2)
        except Exception as exc:  # noqa: BLE001 - a tool that failed is reported, the others still run
            row.error = f"{type(exc).__name__}: {exc}"[:300]
            self.rows.append(row)
            return None
        row.peak_gib = None if peak is None else round(peak, 3)
        row.work_gib = None if work is None else round(work, 3)
        row.cold_s = round(row.cold_s, 3)
        row.warm_s = None if row.warm_s is None else round(row.warm_s, 3)
        self.rows.append(row)
        return first

    def skip(self, tool: str, model: str, why: str) -> None:
        self.rows.append(Row(tool, model, skipped=why))

    def build(self, name: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        out = fn()
        self._sync()
        self.builds[name] = round(time.perf_counter() - t, 2)
        return out


def _param_bytes(model: Any) -> int:
    """Bytes of the parameters and buffers of a NEMO model object's torch modules."""
    import torch

    seen, total = set(), 0
    for attr in ("model", "pipe", "inner"):
        m = getattr(model, attr, None)
        if attr == "inner" and m is not None:
            return _param_bytes(m)
        mods = [m] if isinstance(m, torch.nn.Module) else list(getattr(m, "components", {}).values()) if m else []
        for mod in mods:
            if not isinstance(mod, torch.nn.Module):
                continue
            for t in [*mod.parameters(), *mod.buffers()]:
                if id(t) not in seen:
                    seen.add(id(t))
                    total += t.numel() * t.element_size()
    return total


# -- models ---------------------------------------------------------------------------------------------------
def build_clip(tiny: bool, device: str, dtype, class_names: list[str]):
    """clip-vit-b32's architecture: CLIPConfig() defaults are openai/clip-vit-base-patch32's (text 12 x 512, vision
    ViT-B/32 at 224 px, projection 512, vocabulary 49,408)."""
    import transformers as tf

    from nemo_desktop.core.models.adapters.hf_zero_shot import HFZeroShotClassifier
    from nemo_desktop.core.models.protocols import ModelInfo

    tok = G._clip_tokenizer()
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    if tiny:
        config = tf.CLIPConfig(text_config=dict(vocab_size=512, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=2, num_attention_heads=2, **ids),
                               vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                  num_attention_heads=2, image_size=32, patch_size=8),
                               projection_dim=32)
        size = 32
    else:
        config, size = tf.CLIPConfig(text_config=ids), 224
    with G._Built(device, dtype):
        model = tf.CLIPModel(config).eval()
    processor = tf.CLIPProcessor(image_processor=tf.CLIPImageProcessor(
        size={"shortest_edge": size}, crop_size={"height": size, "width": size}), tokenizer=tok)
    info = ModelInfo("bench:clip-vit-b32-architecture" if not tiny else "bench:clip-tiny", "hf-clip", "random")
    return HFZeroShotClassifier(model, processor, class_names, info, device=device, dtype=dtype,
                                template="a photo of a {}.", siglip=False)


# -- the run --------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from nemo_desktop import api
    from nemo_desktop.core.analyses.competency.estimator import FittedEstimator

    tiny = args.tiny
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["NEMO_HOME"] = str(root / "home")  # the fixed model and any default store stay in here
        b = Bench(args, root)
        dev, dt = args.device, b.dtype
        side = 32 if tiny else 224
        arch = "test_vit" if tiny else "vit_base_patch16_224"
        clf = b.build("classifier", lambda: G.build_classifier(arch, dev, dt, n_classes=10 if tiny else 1000))
        clf_name = f"{'tiny ViT' if tiny else 'ViT-B/16'} (vit-b16-augreg2 arch)"
        classes = clf.class_names[:args.classes]
        mllm_raw = b.build("mllm", lambda: G.build_mllm(G.QWEN_TINY if tiny else G.QWEN25_VL_7B, dev, dt))
        mllm = G.JsonAfterGenerating(mllm_raw)
        mllm_name = f"{'tiny Qwen2.5-VL' if tiny else 'Qwen2.5-VL-7B arch'}, replies capped at {args.tokens} tokens"
        clip = b.build("clip", lambda: build_clip(tiny, dev, dt, classes))
        clip_name = "tiny CLIP" if tiny else "CLIP ViT-B/32 (clip-vit-b32 arch)"
        editor, editor_why = None, None
        if not has("diffusers"):
            editor_why = "diffusers is not installed (the editor flux-kontext-dev is a diffusers pipeline)"
        elif args.no_editor:
            editor_why = "--no-editor"
        else:
            editor = b.build("editor", lambda: G.build_flux_kontext(G.FLUX_TINY if tiny else G.FLUX_KONTEXT_DEV,
                                                                    dev, dt))
        editor_name = "tiny FLUX.1 Kontext" if tiny else "FLUX.1-Kontext-dev arch"
        models_gib = torch.cuda.memory_allocated() / 2**30 if b.cuda else None

        n = args.images
        data = _tiny_models.write_image_folder(root / "data", max(2, n // len(classes)), side, seed=0,
                                               classes=classes)
        n_data = len(classes) * max(2, n // len(classes))
        images = sorted(str(p) for p in data.rglob("*.png"))
        query = images[0]
        kw = {"device": dev, "progress": False}
        t_tok = args.tokens
        mllm_tokens = {"caption_max_new_tokens": t_tok, "hypothesis_max_new_tokens": t_tok,
                       "intervention_max_new_tokens": t_tok}

        # -- cheap tools -------------------------------------------------------------------------------
        b.measure(Row("list_models", "-", note="catalog + on-disk status"), lambda s: api.list_models())
        b.measure(Row("list_analyses", "-"), lambda s: api.analyses())
        b.measure(Row("list_indexes", "-"), lambda s: api.list_indexes(store=s))

        b.measure(Row("predict", clf_name, f"{len(images[:args.predict])} images", {"top_k": 5}),
                  lambda s: api.predict(images[:args.predict], clf, top_k=5, device=dev, progress=False), (clf,))
        out = b.measure(Row("index_dataset", clf_name, f"{n_data} images, {len(classes)} classes"),
                        lambda s: api.index_dataset(data, clf, store=s, **kw), (clf,))
        index_store = out[1] if out else None

        # -- explain -------------------------------------------------------------------------------------
        true = classes[1]
        cam = b.measure(Row("explain cam-mllm", f"{clf_name} + {mllm_name}", "1 image",
                            {"reference": "none"}, note="no editor: CEI not scored"),
                        lambda s: api.explain(query, true, classifier=clf, mllm=mllm, method="cam-mllm",
                                              reference="none", store=s, **kw), (clf, mllm_raw))
        b.measure(Row("explain scitx (zero-shot)", f"{clip_name} + {mllm_name}", "1 image",
                      {"reference": "none", "k": 3, **mllm_tokens},
                      note="zero-shot classifier: hypotheses tested by class prompts, no editor"),
                  lambda s: api.explain(query, true, classifier=clip, mllm=mllm, method="scitx", reference="none",
                                        settings={"k": 3, **mllm_tokens}, store=s, **kw), (clip, mllm_raw))
        if editor is None:
            b.skip("explain scitx (editor)", f"{clf_name} + {mllm_name} + {editor_name}", editor_why)
        else:
            b.measure(Row("explain scitx (editor)", f"{clf_name} + {mllm_name} + {editor_name}", "1 image",
                          {"reference": "none", "k": 3, "edit_steps": args.edit_steps, **mllm_tokens}),
                      lambda s: api.explain(query, true, classifier=clf, mllm=mllm, editor=editor, method="scitx",
                                            reference="none", settings={"k": 3, "edit_steps": args.edit_steps,
                                                                        **mllm_tokens}, store=s, **kw),
                      (clf, mllm_raw, editor))

        # -- stored results ------------------------------------------------------------------------------
        if cam:
            result, store = cam
            b.measure(Row("get_result", "-", "the cam-mllm result"), lambda s: api.get_result(result.key, store=store),
                      warm=True)
            b.measure(Row("export_report (html)", "-", "the cam-mllm result"),
                      lambda s: api.export_report(result.key, root / "r.html", store=store))
        else:
            for t in ("get_result", "export_report (html)"):
                b.skip(t, "-", "explain cam-mllm failed: nothing stored to read")

        # -- competency ---------------------------------------------------------------------------------
        fit_settings = {"epochs": args.epochs}
        fit = b.measure(Row("analysis_competency_estimator", clf_name, f"{n_data} images", fit_settings,
                            note=f"default 50 epochs: about 50/{args.epochs} x the fit's training time"),
                        lambda s: api.run_analysis("competency-estimator", data, classifier=clf,
                                                   settings=fit_settings, store=s, **kw), (clf,))
        if fit:
            estimator = FittedEstimator.from_store(fit[1], fit[0].key, clf)
            b.measure(Row("analysis_competency_score", clf_name, f"{n_data} images"),
                      lambda s: api.run_analysis("competency-score", data, classifier=clf, fitted=estimator,
                                                 store=s, **kw), (clf,))
            cf_settings = {"max_iter": args.max_iter, "max_new_tokens": t_tok}
            if not has("lpips"):
                cf_settings["igd_distance"] = "l2"
            b.measure(Row("analysis_competency_cf", f"{clf_name} + {mllm_name}", "1 image", cf_settings,
                          note="IGD with L2: lpips is not installed" if "igd_distance" in cf_settings else ""),
                      lambda s: api.run_analysis("competency-cf", query, classifier=clf, mllm=mllm,
                                                 fitted=estimator, settings=cf_settings, store=s, **kw),
                      (clf, mllm_raw))
            if not has("lpips"):
                b.skip("analysis_competency_bench", clf_name, "lpips is not installed (the 'competency' extra)")
            else:
                bench_settings = {"max_iter": args.max_iter, "max_images": min(20, n_data)}
                b.measure(Row("analysis_competency_bench", clf_name, f"{n_data} images, <= 20 low-competency",
                              bench_settings),
                          lambda s: api.run_analysis("competency-bench", data, classifier=clf, fitted=estimator,
                                                     settings=bench_settings, store=s, **kw), (clf,))
        else:
            for t in ("analysis_competency_score", "analysis_competency_cf", "analysis_competency_bench"):
                b.skip(t, clf_name, "the estimator fit failed")

        # -- failure modes (on the index) ---------------------------------------------------------------
        if index_store is not None:
            fm_settings = {"clusters": 3, "k": 2}
            index_ids: dict[int, str] = {}

            def index_into(s):  # the tool runs on an index in the store: built there first, untimed
                index_ids[id(s)] = api.index_dataset(data, clf, store=s, **kw)["index_id"]

            b.measure(Row("analysis_failure_modes", f"{clf_name} index + {clip_name}", f"{n_data} images",
                          fm_settings),
                      lambda s: api.run_analysis("failure-modes", index_ids[id(s)], classifier=clf, embedder=clip,
                                                 settings=fm_settings, store=s, **kw), (clf, clip),
                      prepare=index_into)
        else:
            b.skip("analysis_failure_modes", clf_name, "index_dataset failed")

        # -- model differences, global explanation ------------------------------------------------------
        b.skip("analysis_model_diff", f"two classifiers + {mllm_name}",
               "not measured here: its LLM's replies must parse as conditions and hypotheses (random weights write "
               "none, and this benchmark has no reply double for its prompts); benchmarks/model_diff.py times it")
        b.skip("analysis_global_explanation", mllm_name,
               "needs a stored benchmark run of explanations (nemo bench); its cost is its MLLM summary calls")

        # -- fix -----------------------------------------------------------------------------------------
        fix_root = root / "fix"
        for i, (split, per) in enumerate((("train", args.fix_per_class), ("affected", 4), ("rest", 4))):
            # a fixed seed per split (hash() of a string changes from run to run)
            _tiny_models.write_image_folder(fix_root / split, per, side, seed=1 + i, classes=classes)
        fix_settings = {"data": "augment", "affected_classes": classes[0], "per_class": args.fix_per_class,
                        "epochs": args.fix_epochs, "bootstrap": 200, "save": False}
        n_fix = len(classes) * args.fix_per_class
        b.measure(Row("analysis_fix (augment, head)", clf_name,
                      f"{n_fix} train + {len(classes) * 8} held-out images", fix_settings,
                      note="the control's plain augmentation; an edit fix adds the editor's edits"),
                  lambda s: api.run_analysis("fix", fix_root, classifier=clf, settings=fix_settings, store=s, **kw),
                  (clf,))
        if editor is None:
            b.skip("analysis_fix (edit)", f"{clf_name} + {editor_name}", editor_why)

        # every other analysis tool the server lists (a plugin's too) is named, not silently left out
        from nemo_desktop.core.registry.methods import list_methods
        from nemo_desktop.core.registry import list_analyses

        done = {r.tool.split()[0] for r in b.rows}
        for name in sorted(set(list_analyses()) - set(list_methods())):  # the server's analysis_<name> tools
            tool = "analysis_" + name.replace("-", "_")
            if tool not in done:
                b.skip(tool, "-", "not measured by this benchmark")

        return {"device": torch.cuda.get_device_name(0) if b.cuda else "cpu", "dtype": str(dt).replace("torch.", ""),
                "tiny": tiny, "torch": torch.__version__, "build_seconds": b.builds,
                "models_resident_gib": None if models_gib is None else round(models_gib, 3),
                "rows": [r.__dict__ for r in b.rows]}


def table(out: dict[str, Any]) -> str:
    def f(v, digits=2):
        return "-" if v is None else f"{v:.{digits}f}"

    lines = [f"device {out['device']} ({out['dtype']}{', tiny models' if out['tiny'] else ''}); model build seconds "
             f"{out['build_seconds']}; all models resident: {f(out['models_resident_gib'])} GiB",
             f"{'tool':34} {'cold s':>8} {'warm s':>8} {'peak GiB':>9} {'work GiB':>9} {'models GiB':>10}  model / data"]
    for r in out["rows"]:
        if r["skipped"]:
            lines.append(f"{r['tool']:34} {'skipped':>8}  {r['skipped']}")
            continue
        if r["error"]:
            lines.append(f"{r['tool']:34} {'FAILED':>8}  {r['error']}")
            continue
        lines.append(f"{r['tool']:34} {f(r['cold_s']):>8} {f(r['warm_s']):>8} {f(r['peak_gib']):>9} "
                     f"{f(r['work_gib']):>9} {f(r['models_gib']):>10}  {r['model']}; {r['data'] or '-'}"
                     + (f"; {r['note']}" if r["note"] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="toy-size models of the same architectures (smoke test)")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    p.add_argument("--images", type=int, default=None, help="images of the dataset tools (default 200; tiny 20)")
    p.add_argument("--classes", type=int, default=10, help="classes of the dataset folders")
    p.add_argument("--predict", type=int, default=32, help="images of predict")
    p.add_argument("--tokens", type=int, default=None, help="token cap of each MLLM reply (default 64; tiny 8)")
    p.add_argument("--epochs", type=int, default=None, help="competency estimator epochs (default 5; tiny 1)")
    p.add_argument("--max-iter", type=int, default=None, help="competency generators' steps (default 20; tiny 2)")
    p.add_argument("--fix-per-class", type=int, default=None, help="fix training images per class (default 20)")
    p.add_argument("--fix-epochs", type=int, default=2)
    p.add_argument("--edit-steps", type=int, default=None, help="editor steps (default: the editor's own)")
    p.add_argument("--no-editor", action="store_true", help="skip the tools that need the image editor")
    args = p.parse_args(argv)
    t = args.tiny
    args.images = args.images or (20 if t else 200)
    args.tokens = args.tokens or (8 if t else 64)
    args.epochs = args.epochs or (1 if t else 5)
    args.max_iter = args.max_iter or (2 if t else 20)
    args.fix_per_class = args.fix_per_class or (4 if t else 20)
    if t:
        args.edit_steps = args.edit_steps or 2
        args.predict = min(args.predict, 8)
    if t and args.classes > 10:
        p.error("--tiny has 10 classes")
    started = time.perf_counter()
    out = run(args)
    out["total_seconds"] = round(time.perf_counter() - started, 1)
    out["command"] = " ".join(sys.argv)
    print(table(out))
    print(f"total {out['total_seconds']} s")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")
    return 1 if any(r["error"] for r in out["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
