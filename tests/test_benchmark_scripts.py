"""The GPU benchmarks' CPU modes: the same code paths at toy sizes, so they keep working between GPU runs."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scitx_gpu_tiny_profiles_every_stage(capsys, tmp_path):
    pytest.importorskip("diffusers")
    bench = _module("scitx_gpu")
    assert bench.main(["--tiny", "--steps", "2", "--k", "1", "--m", "2", "--references", "6", "--tokens", "4",
                       "--edit-batch", "2", "--json", "--out", str(tmp_path / "f.json")]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "f.json").read_text()) == figures  # written after each run, the last = all
    assert figures["device"] == "cpu" and figures["tiny"] and figures["attention"]["mllm"] == "sdpa"
    default, speed = figures["runs"]
    assert default["settings"] == "default" and speed["settings"] == "speed" and speed["edit_batch_size"] == 2
    for run in (default, speed):
        assert {"classify", "retrieve", "caption", "hypothesis", "intervention", "edit", "score", "total"} <= \
            set(run["seconds"])
        assert run["steps"] == 2 and run["mllm_calls"] > 0 and run["edits"] == 2 and not run["errors"]
        assert run["memory_peak_gib"] > 0 and "Editing" in run["memory_peak_gib_by_stage"]


def test_real_size_configurations_are_the_published_ones():
    """The numbers that make the GPU profile real-size (checked here so an edit cannot shrink them unnoticed)."""
    bench = _module("scitx_gpu")
    text, vision = bench.QWEN25_VL_7B["text"], bench.QWEN25_VL_7B["vision"]
    assert (text["hidden_size"], text["num_hidden_layers"], text["vocab_size"]) == (3584, 28, 152064)
    assert (vision["depth"], vision["hidden_size"], vision["out_hidden_size"]) == (32, 1280, 3584)
    flux = bench.FLUX_KONTEXT_DEV
    assert (flux["transformer"]["num_layers"], flux["transformer"]["num_single_layers"]) == (19, 38)
    assert flux["transformer"]["num_attention_heads"] * flux["transformer"]["attention_head_dim"] == 3072
    assert (flux["t5"]["d_model"], flux["t5"]["num_layers"]) == (4096, 24)
    assert bench.PIX2PIX["unet"]["in_channels"] == 8 and bench.PIX2PIX["unet"]["block_out_channels"][-1] == 1280


def test_index_throughput_runs_and_reports_every_figure(capsys):
    bench = _module("index_throughput")
    assert bench.main(["--arch", "test_resnet", "--images", "8", "--batch", "4", "--workers", "2", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    for key in ("raw_forward_img_per_s", "plain_model_call_img_per_s", "decode_preprocess_1_worker_img_per_s",
                "decode_preprocess_n_workers_img_per_s", "end_to_end_index_stage_img_per_s",
                "end_to_end_over_slower_part", "end_to_end_over_raw_forward"):
        assert figures[key] > 0, key
    assert figures["images"] == 8 and figures["image_size"] == [500, 375] and figures["workers"] == 2


def test_index_throughput_open_clip(capsys, tmp_path):
    """The open_clip path: a random model in open_clip's local-dir layout, loaded through NEMO's loader."""
    pytest.importorskip("open_clip")
    import open_clip

    from fixtures_tiny.classifiers import OPEN_CLIP_TINY_CFG, OPEN_CLIP_TINY_NAME

    (tmp_path / f"{OPEN_CLIP_TINY_NAME}.json").write_text(json.dumps(OPEN_CLIP_TINY_CFG))
    open_clip.add_model_config(tmp_path)
    bench = _module("index_throughput")
    assert bench.main(["--family", "open_clip", "--arch", OPEN_CLIP_TINY_NAME, "--images", "8", "--batch", "4",
                       "--workers", "1", "--repeats", "1", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["family"] == "open_clip" and figures["images"] == 8 and figures["raw_forward_img_per_s"] > 0


@pytest.mark.slow
def test_gui_event_loop_quick_mode_reports_each_phase_against_idle(tmp_path):
    """The event-loop benchmark in its quick mode (real window offscreen, tiny models built by the script):
    indexing and a diagnosis both finish and each phase has its stall figures and its ratio to the idle window;
    the phases tile the measured window, so a stall between two jobs is in one of them."""
    import os
    import subprocess
    import sys

    pytest.importorskip("diffusers")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(BENCHMARKS.parent),
           "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "gui_event_loop.py"), "--quick", "--json"], env=env, check=False,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["jobs"] == {"indexing": "done", "diagnosis": "done", "edit": "done"}
    assert figures["indexed"] == 40 and figures["diagnosis_opened"]
    phases = figures["phases"]
    for name in ("idle", "indexing", "diagnosis", "edit", "anywhere"):
        phase = phases[name]
        assert phase["ticks"] > 0 and phase["max_ms"] >= phase["p99_ms"] > 0, name
    for name in ("indexing", "diagnosis", "edit", "anywhere"):
        phase = phases[name]
        assert phase["ratio_to_idle"] == pytest.approx(phase["max_ms"] / phases["idle"]["max_ms"])
    jobs = [phases[name] for name in ("indexing", "diagnosis", "edit")]
    assert sum(p["ticks"] for p in jobs) == phases["anywhere"]["ticks"]
    assert sum(p["seconds"] for p in jobs) == pytest.approx(phases["anywhere"]["seconds"])
    assert max(p["max_ms"] for p in jobs) == phases["anywhere"]["max_ms"] == figures["whole_max_ms"]
    for name in ("while indexing", "while diagnosis", "while edit", "anywhere"):
        assert f"RESULT {name}" in proc.stdout


def test_gui_event_loop_busy_processes_keep_a_cpu_busy_and_are_stopped():
    """`--busy N`: N processes that each use a whole CPU while they run, all gone after stop_busy."""
    import time

    bench = _module("gui_event_loop")
    procs = bench.start_busy(2)
    try:
        import psutil

        def used() -> list[float]:
            return [sum(psutil.Process(p.pid).cpu_times()[:2]) for p in procs]

        deadline = time.monotonic() + 30  # a loaded machine gives them a small share; a sleeper never gets there
        while min(used()) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
        assert min(used()) >= 0.5, used()  # spinning, not sleeping
    finally:
        bench.stop_busy(procs)
    assert all(p.poll() is not None for p in procs)
    assert bench.start_busy(0) == []
    procs = bench.start_busy(1, nice=10)  # --busy-nice: as the model worker, to share the CPU fairly with it
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(procs[0].pid).nice() != 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert psutil.Process(procs[0].pid).nice() == 10
    finally:
        bench.stop_busy(procs)


@pytest.mark.gui
def test_gui_past_results_compares_the_chunked_fill_with_one_turn(qapp, capsys):
    assert _module("gui_past_results").main(["--rows", "100"]) == 0
    out = capsys.readouterr().out
    assert "100 results, 40 rows a turn: longest turn" in out and "over 3 turns" in out and "in one turn" in out


def test_mcp_tool_costs_tiny_runs_as_on_the_gpu_machine(tmp_path):
    """benchmarks/mcp_tool_costs.py --device cpu --tiny with the packages the GPU machine lacks made unimportable:
    it must import neither PySide6 nor mcp, and name each tool it could not measure with the reason."""
    import subprocess
    import sys

    missing = ("mcp", "PySide6", "diffusers", "open_clip", "platformdirs", "lpips")
    out = tmp_path / "costs.json"
    code = (f"import runpy, sys\nfor m in {missing!r}:\n    sys.modules[m] = None\n"
            f"sys.argv = ['mcp_tool_costs.py', '--device', 'cpu', '--tiny', '--out', {str(out)!r}]\n"
            f"runpy.run_path({str(BENCHMARKS / 'mcp_tool_costs.py')!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          cwd=BENCHMARKS.parent, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    rows = {r["tool"]: r for r in figures["rows"]}
    assert figures["tiny"] and figures["device"] == "cpu" and "mcp" not in figures["build_seconds"]
    measured = {"predict", "index_dataset", "explain cam-mllm", "explain scitx (zero-shot)", "get_result",
                "export_report (html)", "analysis_competency_estimator", "analysis_competency_score",
                "analysis_competency_cf", "analysis_failure_modes", "analysis_fix (augment, head)"}
    for tool in measured:
        r = rows[tool]
        assert not r["error"] and not r["skipped"] and r["cold_s"] > 0 and r["warm_s"] is not None, r
    for tool, why in (("explain scitx (editor)", "diffusers is not installed"),
                      ("analysis_competency_bench", "lpips is not installed"),
                      ("analysis_fix (edit)", "diffusers is not installed")):
        assert why in rows[tool]["skipped"]
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.core.registry import list_analyses

    named = {t.split()[0] for t in rows}
    assert {"analysis_" + a.replace("-", "_") for a in set(list_analyses()) - set(list_methods())} <= named
    assert "analysis_fix (augment, head)" in proc.stdout and "peak GiB" in proc.stdout


def test_scitx_profiles_tiny_reports_tokens_and_memory_per_stage(capsys, tmp_path):
    """Issue 40's GPU figures script, its CPU mode: per stage seconds, tokens, tokens/s and sequential calls, the
    batched run against one call per unit, the profile's MLLM settings."""
    pytest.importorskip("diffusers")
    pytest.importorskip("torchao")
    bench = _module("scitx_profiles")
    out = tmp_path / "p.json"
    assert bench.main(["--profile", "48 GB", "--tiny", "--steps", "2", "--k", "1", "--m", "2", "--references", "6",
                       "--realistic", "4", "6", "4", "--only", "realistic", "--unbatched", "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["profile"] == "48 GB" and figures["mllm"] == {"quantize": "int8", "static_cache": False,
                                                                  "batch_size": 8}
    batched, unbatched = figures["runs"]
    assert (batched["run"], unbatched["run"]) == ("realistic", "realistic-unbatched")
    for run in (batched, unbatched):
        assert not run.get("failed") and run["edits"] == 2 and run["memory_peak_gib"] > 0
        hyp = run["mllm_stages"]["hypothesis"]
        assert hyp["tokens"] == 2 * 6 and hyp["tokens_per_s"] > 0  # random weights: every reply to its cap
    assert batched["mllm_stages"]["hypothesis"]["sequential_calls"] == 1
    assert unbatched["mllm_stages"]["hypothesis"]["sequential_calls"] == 2


def _row(cause, behaviour, cands, controls, seed=0):
    return {"seed": seed, "cause": cause, "behaviour": behaviour,
            "target": None if behaviour is None else "all", "cands": cands, "controls": controls}


def test_control_rule_choice_replays_the_evidence_rule_per_family(capsys, tmp_path):
    """benchmarks/control_rule_choice.py (how the control's defaults were chosen): its offline replay reads a
    confident reference unclamped, lets a borderline reference's round trip through by the points share, stops
    at the noise floor, and reports each family on its own whatever order the files come in."""
    pytest.importorskip("sklearn")
    bench = _module("control_rule_choice")
    confident = {"before": 1e-10, "after": 1e-7}  # +6.9 nats, nothing in points: a drawing the clamp hid
    round_trip = {"before": 0.3, "after": 0.38}  # +8 points, +0.36 nats
    paste = {"j": 0, "kind": "bad", "cei": 60.0, "pb": 0.2, "pa": 0.8, "verdict": "local"}
    true = {"j": 0, "kind": "true", "cei": 40.0, "pb": 0.1, "pa": 0.5, "verdict": "local"}
    weak = {"j": 1, "kind": "distractor", "cei": 4.0, "pb": 0.1, "pa": 0.14, "verdict": "local"}
    digits = [_row("scale", "paste-true-class", [paste, weak],
                   [{"j": 0, "refs": [confident] * 6}])]
    photos = [_row("blur", None, [true, weak], [{"j": 0, "refs": [round_trip] + [{"before": 1e-4, "after": 1e-4}] * 5}])]
    assert bench.select(digits[0], 6, 3.5, 1e-30, 0.5) is None  # unclamped: +6.9 nats > 3.5
    assert bench.select(digits[0], 6, 3.5, 1e-6, 0.5)["kind"] == "bad"  # clamped at 1e-6: no rise at all
    assert bench.select(photos[0], 6, 3.5, 1e-30, 0.5)["kind"] == "true"
    assert bench.select(photos[0], 6, 3.5, 1e-30, 0.1) is None  # +8 points > max(5, 0.1 x 40)
    files = []
    for name, rows in (("digits", digits), ("photos", photos)):
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    outs = []
    for order in (files, files[::-1]):
        assert bench.main(["report", *map(str, order), "--share", "0.5"]) == 0
        outs.append(sorted(capsys.readouterr().out.splitlines()))
    assert outs[0] == outs[1]
    assert any(line.strip().startswith("recovery / blur") and " 1.000 " in line for line in outs[0])
    assert any(line.strip().startswith("paste-true-class / all") and " 0.000 " in line for line in outs[0])
