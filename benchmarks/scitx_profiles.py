"""SciTX per stage under a memory profile (issue 40): seconds, tokens generated, tokens/s and peak memory.

    python benchmarks/scitx_profiles.py --profile "80 GB" [--size 512] [--out run.json]   # on a CUDA machine
    python benchmarks/scitx_profiles.py --profile "24 GB" --tiny --device cpu            # the flow, on the CPU

The models are scitx_gpu.py's: Qwen2.5-VL-7B, FLUX.1-Kontext-dev and ViT-B/16 architectures with random
weights, in bf16, wrapped in NEMO's adapters. The profile (core/models/profiles.py) decides the MLLM's weights
(bf16 or torchao int8), its batch size, the editor's weights (bf16 or int8) and whether it is offloaded; on
CUDA the process is capped at the profile's size with torch.cuda.set_per_process_memory_fraction once the models
are built (the editor is built on the device, quantised there if the profile says so, then offloaded), so "24 GB" is measured as a 24 GiB card would see it (an out-of-memory error is a result: it is recorded, with the stage). Every stage sends its work
at once (SciTX's defaults); `--unbatched` adds the one-call-per-unit run for comparison.

Random weights never end a reply, so every reply runs to its token cap. Two runs per profile say which is which:
"cap" with SciTX's default caps (captions 160, hypotheses 512, interventions 256 tokens: an upper bound), and
"realistic" with the caps set to assumed real reply lengths (captions 60, hypotheses 80, interventions 60 tokens;
change with --realistic). Tokens are the replies' completion tokens as the adapter counted them.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import scitx_gpu as g  # noqa: E402

DEFAULT_CAPS = (160, 512, 256)  # SciTXConfig's caption / hypothesis / intervention defaults
REALISTIC_CAPS = (60, 80, 60)
MLLM_STAGES = {"Captioning observations": "caption", "Generating hypotheses": "hypothesis",
               "Writing interventions": "intervention"}


class StageTokens(g.JsonAfterGenerating):
    """JSON after generating (scitx_gpu.py), counting completion tokens and sequential calls per stage."""

    def __init__(self, inner, memory) -> None:
        super().__init__(inner)
        self.memory, self.tokens, self.sequential = memory, {}, {}

    def _count(self) -> None:
        stage = MLLM_STAGES.get(self.memory.stage, self.memory.stage)
        used = sum(self.inner.last_usage.get("completion_tokens", []))
        self.tokens[stage] = self.tokens.get(stage, 0) + int(used)
        self.sequential[stage] = self.sequential.get(stage, 0) + 1

    def chat(self, messages, **kw):
        reply = super().chat(messages, **kw)
        self._count()
        return reply

    def chat_batch(self, conversations, **kw):
        replies = super().chat_batch(conversations, **kw)
        self._count()
        return replies

    def chat_requests(self, requests):
        self.calls += len(requests)
        replies = self.inner.chat_requests(requests)
        self._count()
        return [self._fix(self._text(q.messages), r, q.seed) for q, r in zip(requests, replies)]


def build(args, profile):
    import torch

    from nemo_desktop.core.models.mllm_fast import FastOptions, apply_fast_paths
    from nemo_desktop.core.models.protocols import ModelInfo

    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    times = {}
    t = time.perf_counter()
    clf = g.build_classifier("test_vit" if args.tiny else "vit_base_patch16_224", args.device, dtype,
                             n_classes=10 if args.tiny else 1000)
    times["classifier"] = time.perf_counter() - t
    t = time.perf_counter()
    mllm = g.build_mllm(g.QWEN_TINY if args.tiny else g.QWEN25_VL_7B, args.device, dtype)
    fast = FastOptions(quantize=profile.mllm_quantize, static_cache=args.static_cache)
    apply_fast_paths(mllm.model, fast, args.device)
    mllm.batch_size, mllm.static_cache = profile.mllm_batch_size, fast.static_cache
    times["mllm"] = time.perf_counter() - t
    t = time.perf_counter()
    offload = profile.editor_offload and cuda
    # built on the device (random init of 12B weights on the CPU takes minutes), then offloaded to host memory
    editor = g.build_flux_kontext(g.FLUX_TINY if args.tiny else g.FLUX_KONTEXT_DEV, args.device, dtype)
    if profile.editor_quantize:  # the editor option `quantize`, applied as its loader does (here on the device)
        from nemo_desktop.core.models.adapters.diffusers_quantize import quantize_pipeline

        quantize_pipeline(editor.pipe, profile.editor_quantize, editor.info.model_id)
    if offload:
        editor.pipe.enable_model_cpu_offload(device=args.device)
        torch.cuda.empty_cache()
    editor.info = ModelInfo(editor.info.model_id, editor.info.family, editor.info.revision,
                            extra={"device": "cpu" if offload else args.device})  # where its batch is sized
    times["editor"] = time.perf_counter() - t
    return clf, mllm, editor, times, fast


def run_once(args, clf, mllm, editor, caps, speed, tmp: Path, label: str) -> dict:
    import torch

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.base.errors import NemoError
    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline
    from nemo_desktop.core.store import ResultsStore

    cuda = args.device.startswith("cuda")
    query, _, y = g.reference_world(tmp / label, clf, args.size, n=args.references)
    memory = g.MemoryByStage(cuda)
    wrapped = StageTokens(mllm, memory)
    cfg = SciTXConfig(k=args.k, m=args.m, edit_steps=args.steps or None, edit_size=(args.size, args.size),
                      caption_max_new_tokens=caps[0], hypothesis_max_new_tokens=caps[1],
                      intervention_max_new_tokens=caps[2], **speed)
    row = {"run": label, "caps": dict(zip(("caption", "hypothesis", "intervention"), caps)), **speed}
    with ResultsStore.open(db_path=tmp / f"store-{label}" / "results.sqlite") as store:
        index = build_index(tmp / label / "ref", clf, store)
        t = time.perf_counter()
        try:
            result = SciTXPipeline(clf, wrapped, editor, store=store, reference=index, config=cfg)(
                query, y, JobContext(memory))
        except (NemoError, RuntimeError) as exc:  # out of memory under the cap is a result
            memory.close()
            return {**row, "failed": f"{type(exc).__name__}: {getattr(exc, 'message', exc)}",
                    "failed_in_stage": memory.stage, "memory_peak_gib_by_stage": memory.peaks}
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t
        memory.close()
    seconds = {k: round(v, 3) for k, v in result.timings.items()}
    per_stage = {}
    for stage in ("caption", "hypothesis", "intervention"):
        tok, sec = wrapped.tokens.get(stage, 0), result.timings.get(stage, 0.0)
        per_stage[stage] = {"seconds": round(sec, 3), "tokens": tok, "tokens_per_s": round(tok / sec, 1) if sec else None,
                            "sequential_calls": wrapped.sequential.get(stage, 0)}
    return {**row, "seconds": seconds, "wall_seconds": round(wall, 3), "mllm_stages": per_stage,
            "observations": len(result.observations), "edits": sum(1 for c in result.candidates if c.edited_artifact),
            "memory_peak_gib_by_stage": {k: round(v, 3) for k, v in memory.peaks.items()},
            "memory_peak_gib": round(max(memory.peaks.values(), default=0.0), 3),
            "errors": [c.error for c in result.candidates if c.error], "notes": result.notes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="80 GB")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy sizes of the same architectures (the flow, on a CPU)")
    ap.add_argument("--size", type=int, default=None, help="edit size (default 512; tiny 32)")
    ap.add_argument("--steps", type=int, default=0, help="editor steps (0 = FLUX's default 28)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--m", type=int, default=3)
    ap.add_argument("--references", type=int, default=None, help="reference images (default 60; tiny 12)")
    ap.add_argument("--realistic", type=int, nargs=3, default=list(REALISTIC_CAPS),
                    metavar=("CAPTION", "HYPOTHESIS", "INTERVENTION"), help="assumed real reply lengths (tokens)")
    ap.add_argument("--only", choices=("cap", "realistic"), default=None, help="one of the two runs only")
    ap.add_argument("--unbatched", action="store_true", help="also the one-call-per-unit run (realistic caps)")
    ap.add_argument("--static-cache", action="store_true", help="the MLLM with a static KV cache")
    ap.add_argument("--out", type=Path, default=None, help="JSON written after every run")
    args = ap.parse_args(argv)
    args.size = args.size or (32 if args.tiny else 512)
    args.references = args.references or (12 if args.tiny else 60)
    if args.tiny and args.device == "cuda":
        args.device = "cpu"

    import torch

    from nemo_desktop.core.models.profiles import GIB, get_profile

    profile = get_profile(args.profile)
    cuda = args.device.startswith("cuda")
    out = {"profile": profile.name, "summary": profile.summary, "device": torch.cuda.get_device_name(0) if cuda
           else "cpu", "tiny": args.tiny, "size": args.size, "k": args.k, "m": args.m, "runs": []}
    t = time.perf_counter()
    try:
        clf, mllm, editor, times, fast = build(args, profile)
    except Exception as exc:  # noqa: BLE001 - a profile whose models cannot be built: a result
        out["failed"] = f"building the models: {type(exc).__name__}: {str(exc)[:400]}"
        print(json.dumps(out, indent=2))
        if args.out:
            args.out.write_text(json.dumps(out, indent=2))
        return 0
    if cuda and profile.memory_gib:
        # The cap from here on (models are built uncapped: the editor is offloaded only after it is built); what
        # is already allocated counts against it, as on a card of that size.
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = min(1.0, profile.memory_gib * GIB / total)
        torch.cuda.set_per_process_memory_fraction(fraction)
        out["memory_cap_gib"] = round(fraction * total / GIB, 2)
    out["build_seconds"] = {k: round(v, 1) for k, v in times.items()}
    out["mllm"] = {"quantize": fast.quantize, "static_cache": fast.static_cache, "batch_size": mllm.batch_size}
    out["editor"] = {"quantize": profile.editor_quantize, "offload": bool(profile.editor_offload and cuda)}
    out["resident_gib"] = round(torch.cuda.memory_allocated() / GIB, 2) if cuda else None
    print(f"{profile.name}: built in {time.perf_counter() - t:.1f} s; {json.dumps(out)}", flush=True)
    runs = [("cap", DEFAULT_CAPS, {}), ("realistic", tuple(args.realistic), {})]
    if args.only:
        runs = [r for r in runs if r[0] == args.only]
    if args.unbatched:
        runs.append(("realistic-unbatched", tuple(args.realistic),
                     {"caption_batch_size": 1, "batch_requests": False, "edit_batch_size": 1}))
    with tempfile.TemporaryDirectory() as tmp:
        for label, caps, speed in runs:
            row = run_once(args, clf, mllm, editor, caps, speed, Path(tmp), label)
            out["runs"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
