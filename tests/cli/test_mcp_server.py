"""`nemo mcp` end to end: the MCP SDK's own client talks to the real server over stdio (a child process), with tiny
local models: a tiny timm classifier saved with save_for_hf, and the plugin distribution's 'tiny-colour'
classifier and 'tiny-caption' method (fixtures_tiny/plugin_dist.py, found through its entry points)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("mcp")

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm  # noqa: E402
from fixtures_tiny.mcp_stdio import child_env, stdio_session  # noqa: E402
from fixtures_tiny.plugin_dist import METHOD, write_plugin_dist  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    data = root / "data"
    data.mkdir()
    model = build_tiny_timm(data / "timm", label_names=TINY_CLASSES, input_size=32)
    rng = np.random.default_rng(0)
    images = []
    for i in range(2):
        p = data / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(p)
        images.append(str(p))
    green = data / "green.png"
    Image.new("RGB", (16, 16), (20, 230, 20)).save(green)
    outside = root / "outside"
    outside.mkdir()
    secret = outside / "private.png"
    Image.new("RGB", (8, 8)).save(secret)
    site = write_plugin_dist(root / "site")
    return {"root": root, "data": data, "model": model, "images": images, "green": str(green),
            "secret": str(secret), "outside": outside, "site": site}


def _env(world, home: Path) -> dict[str, str]:
    return child_env(home, [world["site"]])


def connected(world, tmp_path, *extra: str):
    return stdio_session([world["data"]], tmp_path, *extra, extra_paths=[world["site"]])


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def _json(result) -> dict:
    assert not result.is_error, _text(result)
    return json.loads(result.content[0].text)


async def test_tools_predict_explain_results_reports_and_refusals(world, tmp_path):
    async with connected(world, tmp_path) as (s, _):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        # derived from the registry: every method in explain's enum (the plugin's too), its settings' schema
        assert {"list_models", "list_analyses", "predict", "explain", "get_result", "export_report"} <= set(tools)
        explain = tools["explain"].input_schema
        assert {"scitx", "cam-mllm", METHOD} <= set(explain["properties"]["method"]["enum"])
        k = explain["properties"]["settings"]["properties"]["k"]
        assert k["type"] == "integer" and "minimum" in k and k["description"]
        assert explain["properties"]["settings"]["properties"]["wait_s"]["maximum"] == 600.0
        assert "analysis_failure_modes" in tools and "analysis_tiny_brightness" in tools  # a plugin's analysis
        assert tools["analysis_failure_modes"].input_schema["required"][:1] == ["data"]

        listed = _json(await s.call_tool("list_models", {"kind": "classifier"}))
        assert any(m["id"] == "vit-b16-augreg2" and m["status"] for m in listed["models"])
        assert {"kind": "classifier", "family": "tiny-colour", "plugin": "nemo-tiny-plugin"} in listed["families"]
        assert {p["name"] for p in listed["skipped_plugins"]} == {"broken-family", "broken-analysis"}

        preds = _json(await s.call_tool("predict", {"images": world["images"], "top_k": 3,
                                                    "classifier": f"timm:local-dir:{world['model']}"}))
        assert [r["image"] for r in preds["results"]] == world["images"]
        assert all(len(r["top_k"]) == 3 and r["top_k"][0]["name"] in TINY_CLASSES for r in preds["results"])

        progress = []

        async def on_progress(value, total, message):
            progress.append((value, total, message))

        res = await s.call_tool("explain", {"image": world["green"], "true_label": "red", "method": METHOD,
                                            "classifier": "tiny-colour:plain", "settings": {"wait_s": 0.6},
                                            "include_images": True}, progress_callback=on_progress)
        out = _json(res)
        assert out["explanation"] == "The image is mostly green, not red."
        assert out["prediction"]["predicted"] == "green" and out["result_key"]
        assert Path(out["evidence"]["Input image"]).is_file()
        assert any(c.type == "image" and c.mime_type == "image/png" for c in res.content)
        assert progress and all(b > a for (a, *_), (b, *_) in zip(progress, progress[1:]))
        assert any("Waiting" in (m or "") for *_, m in progress)

        key = out["result_key"]
        got = _json(await s.call_tool("get_result", {"key": key[:10]}))
        assert got["result_key"] == key and got["data"]["explanation"] == out["explanation"]
        resource = await s.read_resource(f"nemo://result/{key}")
        assert json.loads(resource.contents[0].text)["data"]["method"] == METHOD
        assert any(str(r.uri).endswith(key) for r in (await s.list_resources()).resources)

        brightness = _json(await s.call_tool("analysis_tiny_brightness", {"data": world["green"]}))
        assert brightness["data"]["brightness"] > 0 and brightness["result_key"] is None  # a plugin's analysis

        report = world["data"] / "report.html"
        written = _json(await s.call_tool("export_report", {"key": key, "path": str(report)}))
        assert written["path"] == str(report) and report.read_text().lstrip().lower().startswith("<!doctype html")

        # -- refusals: paths outside the roots, bad arguments; each a tool error with a clear message
        async def error(name, args) -> str:
            r = await s.call_tool(name, args)
            text = _text(r)
            assert r.is_error and text.startswith("error: ") and "Traceback" not in text, text
            return text

        text = await error("predict", {"images": [world["secret"]], "classifier": "tiny-colour:plain"})
        assert "outside the folders this server may use" in text and "--root" in text
        assert "outside" in await error("predict", {"images": world["images"][:1],
                                                    "classifier": f"timm:local-dir:{world['outside']}"})
        assert "outside" in await error("export_report", {"key": key, "path": str(world["outside"] / "r.html")})
        link = world["data"] / "sneaky.png"
        if not link.exists():
            link.symlink_to(world["secret"])
        assert "outside" in await error("predict", {"images": [str(link)], "classifier": "tiny-colour:plain"})
        assert "top_k" in await error("predict", {"images": world["images"], "classifier": "x", "top_k": "three"})
        assert "no argument(s) colour" in await error("predict", {"images": world["images"], "classifier": "x",
                                                                  "colour": 1})
        text = await error("explain", {"image": world["green"], "true_label": "red", "classifier": "tiny-colour:p",
                                       "method": METHOD, "settings": {"wait_s": 9999}})
        assert "at most 600" in text
        text = await error("explain", {"image": world["green"], "true_label": "red", "classifier": "tiny-colour:p",
                                       "method": METHOD, "settings": {"nope": 1}})
        assert "no option(s) nope" in text
        text = await error("explain", {"image": world["green"], "true_label": "purple",
                                       "classifier": "tiny-colour:p", "method": METHOD})
        assert "purple" in text
        assert "neither a catalog id" in await error("predict", {"images": world["images"], "classifier": "nope"})
        assert "Unknown tool" in await error("no_such_tool", {})


async def test_a_cancelled_run_stops_and_the_server_goes_on(world, tmp_path):
    import anyio

    async with connected(world, tmp_path) as (s, errlog):
        started = anyio.Event()

        async def on_progress(value, total, message):
            started.set()

        async def long_call():
            await s.call_tool("explain", {"image": world["green"], "true_label": "red", "method": METHOD,
                                          "classifier": "tiny-colour:plain", "settings": {"wait_s": 120}},
                              progress_callback=on_progress)

        t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            with anyio.fail_after(60):
                await started.wait()
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned request
        # Jobs run one at a time: this one finishes only once the cancelled job has stopped.
        with anyio.fail_after(60):
            out = _json(await s.call_tool("explain", {"image": world["green"], "true_label": "red",
                                                      "method": METHOD, "classifier": "tiny-colour:plain"}))
        assert out["explanation"] and time.monotonic() - t0 < 60
        errlog.flush()
        log = Path(errlog.name).read_text()
        assert "cancelled by the client" in log and "job stopped (cancelled)" in log


def test_http_needs_a_token_off_loopback(capsys):
    from nemo_desktop.cli.main import main

    assert main(["mcp", "--http", "--http-host", "0.0.0.0"]) == 2
    assert "needs a bearer token" in capsys.readouterr().err
    assert main(["mcp", "--root", "/no/such/folder"]) == 2


async def test_streamable_http_on_loopback_with_a_token(world, tmp_path, free_tcp_port):
    import subprocess

    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    env = _env(world, tmp_path / "home") | {"NEMO_MCP_TOKEN": "s3cret-token-for-tests"}
    proc = subprocess.Popen([sys.executable, "-m", "nemo_desktop.cli", "mcp", "--http", "--http-port",
                             str(free_tcp_port), "--root", str(world["data"])], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    url = f"http://127.0.0.1:{free_tcp_port}/mcp"
    try:
        with anyio.fail_after(90):
            while True:
                try:
                    async with httpx2.AsyncClient() as c:
                        r = await c.post(url, json={})
                    break
                except httpx2.TransportError:
                    assert proc.poll() is None, proc.stderr.read().decode()
                    await anyio.sleep(0.3)
        assert r.status_code == 401  # no token
        headers = {"Authorization": "Bearer s3cret-token-for-tests"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    names = {t.name for t in (await s.list_tools()).tools}
                    assert "explain" in names
                    out = _json(await s.call_tool("predict", {"images": world["images"][:1],
                                                              "classifier": "tiny-colour:plain"}))
                    assert out["results"][0]["top_k"][0]["name"] in ("red", "green", "blue")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class _CauseWriter:
    """The MLLM behind the loopback OpenAI-compatible endpoint: writes the JSON reply CamMLLM asks for."""

    def chat(self, messages, **kw):
        return json.dumps({"cause_of_error": "The striped background misleads the model."})


async def test_explain_with_a_paper_method_on_tiny_models(world, tmp_path):
    """cam-mllm (Grad-CAM of the tiny timm classifier + an MLLM on a loopback OpenAI-compatible endpoint)."""
    from fixtures_tiny.model_diff_llms import serve_openai_compatible

    endpoint = serve_openai_compatible(_CauseWriter())
    try:
        async with connected(world, tmp_path) as (s, _):
            clf = f"timm:local-dir:{world['model']}"
            top = _json(await s.call_tool("predict", {"images": world["images"][:1], "classifier": clf}))
            wrong = top["results"][0]["top_k"][1]["name"]  # not the prediction: a misclassified image
            progress = []

            async def on_progress(value, total, message):
                progress.append(value)

            res = await s.call_tool("explain", {
                "image": world["images"][0], "true_label": wrong, "method": "cam-mllm", "reference": "none",
                "classifier": f"timm:local-dir:{world['model']}", "include_images": True,
                "mllm": f"openai-compatible:http://127.0.0.1:{endpoint.server_port}/v1"}, progress_callback=on_progress)
            out = _json(res)
            # Progress grows over the whole call through the method's stages (each once counted 0..1 on its own,
            # which read as 0.01, then 100 again and again).
            assert len(progress) >= 3 and all(b > a for a, b in zip(progress, progress[1:])), progress
            assert progress[-1] < 100
            assert out["method"] == "cam-mllm" and out["explanation"] == "The striped background misleads the model."
            assert out["cei"] is None  # not scored: no editor, and the classifier is not zero-shot
            assert Path(out["evidence"]["Grad-CAM overlay"]).is_file()
            assert "image: Grad-CAM overlay" in _text(res)  # each image follows a line naming it
            assert {c.mime_type for c in res.content if c.type == "image"} == {"image/png"}
            assert _json(await s.call_tool("get_result", {"key": out["result_key"]}))["data"]["method"] == "cam-mllm"
    finally:
        endpoint.shutdown()


def test_without_the_sdk_the_command_says_what_to_install(monkeypatch, capsys):
    from nemo_desktop.cli.main import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "needs the MCP SDK" in err and "nemo-desktop[mcp]" in err


async def test_compare_two_models(world, tmp_path):
    """analysis_model_diff: two tiny timm classifiers on rendered digits, an LLM double on a loopback endpoint."""
    from fixtures_tiny.model_diff_llms import DiffLLM, serve_openai_compatible

    digits = [str(d) for d in range(10)]
    a = build_tiny_timm(world["data"] / "digits-a", label_names=digits, input_size=32, seed=0)
    b = build_tiny_timm(world["data"] / "digits-b", label_names=digits, input_size=32, seed=1)
    endpoint = serve_openai_compatible(DiffLLM())
    try:
        async with connected(world, tmp_path) as (s, _):
            settings = {"samples_per_condition": 2, "initial_conditions": 2, "iterations": 1, "explore_size": 2,
                        "beam_size": 2, "test_conditions": 8}
            out = _json(await s.call_tool("analysis_model_diff", {
                "classifier": f"timm:local-dir:{a}", "classifier_b": f"timm:local-dir:{b}", "generator": "digits",
                "mllm": f"openai-compatible:http://127.0.0.1:{endpoint.server_port}/v1", "settings": settings}))
            d = out["data"]
            assert d["analysis"] == "model-diff" and out["result_key"]
            assert [e["method"] for e in d["explanations"]] == ["raw-differences", "summarization", "optimization"]
            bad = await s.call_tool("analysis_model_diff", {
                "classifier": f"timm:local-dir:{a}", "classifier_b": f"timm:local-dir:{b}",
                "generator": f"dataset:{world['outside'] / 'attributes.csv'}", "settings": settings,
                "mllm": f"openai-compatible:http://127.0.0.1:{endpoint.server_port}/v1"})
            assert bad.is_error and "outside the folders" in _text(bad)
    finally:
        endpoint.shutdown()
