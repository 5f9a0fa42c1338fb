"""The competency tools of `nemo mcp` over stdio (the SDK's own client, the real server in a child process), as an
agent uses them: fit a competency estimator on a labelled folder (analysis_competency_estimator), score a set with
it (analysis_competency_score), explain one image's low competency (analysis_competency_cf) with an MLLM on a
loopback OpenAI-compatible endpoint; a tiny random timm classifier saved with save_for_hf and loaded by the real
loader. And the refusals: an estimator or a calibration set outside the server's roots, an unknown estimator."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("mcp")

from fixtures_tiny.classifiers import build_tiny_timm  # noqa: E402
from fixtures_tiny.images import write_colour_folders  # noqa: E402
from fixtures_tiny.mcp_stdio import stdio_session, text_of  # noqa: E402

pytestmark = pytest.mark.anyio
CLASSES = ["red", "green", "blue"]
WITHOUT = "The image is mostly noise with no clear colour."
WITH = "The counterfactual is one clear colour; the original's speckles make it unfamiliar."
FIT = {"epochs": 2, "image_size": 16, "latent_dim": 8, "batch_size": 8, "calibration_fraction": 0.34}


class _Explainer:
    """The MLLM behind the loopback endpoint: one reply for the image alone, another beside a counterfactual
    (the paper's prompt B.5 shows the two side-by-side), so the test sees which prompt was answered."""

    def chat(self, messages, **kw):
        prompt = " ".join(p for m in messages for p in m.content if isinstance(p, str)).lower()
        return WITH if "side-by-side" in prompt else WITHOUT


def _labelled_folder(root: Path, rng) -> Path:
    return write_colour_folders(root, CLASSES, rng)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-competency")
    data = root / "data"
    model = build_tiny_timm(data / "model", num_classes=3, label_names=CLASSES, input_size=32)
    rng = np.random.default_rng(0)
    images = _labelled_folder(data / "images", rng)
    odd = data / "odd.png"
    Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(odd)
    outside = _labelled_folder(root / "outside" / "calibration", rng)
    return {"data": data, "classifier": f"timm:local-dir:{model}", "images": images, "odd": odd,
            "outside": outside}


def _json(result) -> dict:
    assert not result.is_error, text_of(result)
    return json.loads(result.content[0].text)


async def test_fit_score_and_explain_competency_through_mcp(world, tmp_path):
    from fixtures_tiny.model_diff_llms import serve_openai_compatible

    endpoint = serve_openai_compatible(_Explainer())
    mllm = f"openai-compatible:http://127.0.0.1:{endpoint.server_port}/v1"
    clf = world["classifier"]
    try:
        async with stdio_session([world["data"]], tmp_path) as (s, _):
            tools = {t.name: t for t in (await s.list_tools()).tools}
            cf_schema = tools["analysis_competency_cf"].input_schema
            assert cf_schema["required"] == ["data", "classifier", "fitted"] and "mllm" in cf_schema["properties"]
            assert {"explain_methods", "max_iter"} <= set(cf_schema["properties"]["settings"]["properties"])

            fit = _json(await s.call_tool("analysis_competency_estimator", {
                "data": str(world["images"]), "classifier": clf, "settings": FIT}))
            key, d = fit["result_key"], fit["data"]
            assert d["analysis"] == "competency-estimator" and len(key) == 64
            assert d["manifest"]["dataset"]["n_images"] == 18 and d["manifest"]["dataset"]["n_calibration"] == 6
            again = _json(await s.call_tool("analysis_competency_estimator", {
                "data": str(world["images"]), "classifier": clf, "settings": FIT}))
            assert again["result_key"] == key  # answered from the store

            scored = _json(await s.call_tool("analysis_competency_score", {
                "data": str(world["images"]), "classifier": clf, "fitted": key[:10], "settings": {"threshold": 0.5}}))
            sd = scored["data"]
            assert sd["analysis"] == "competency-score" and len(sd["items"]) == 18 and scored["result_key"]
            for item in sd["items"]:
                sc = item["score"]
                assert 0 <= sc["competency"] <= 1
                assert sc["competency"] == pytest.approx(sc["confidence"] * sc["id_probability"], rel=1e-5)

            res = await s.call_tool("analysis_competency_cf", {
                "data": str(world["odd"]), "classifier": clf, "fitted": key, "mllm": mllm, "include_images": True,
                "settings": {"methods": ["reco", "lgd"], "explain_methods": ["reco"], "max_iter": 2,
                             "min_side": 32, "max_new_tokens": 16}})
            cf = _json(res)
            c = cf["data"]
            assert c["analysis"] == "competency-cf" and cf["result_key"]
            outputs = {o["method"]: o for o in c["counterfactuals"]}
            assert list(outputs) == ["reco", "lgd"]
            assert all(o["competency_after"] is not None and o["error"] is None for o in outputs.values()), outputs
            assert c["explanation_without"] == WITHOUT and outputs["reco"]["explanation"] == WITH
            assert outputs["lgd"]["explanation"] in (None, "")  # only the methods asked to be explained are
            assert [ct.mime_type for ct in res.content if ct.type == "image"]  # its images as image content
            assert all(Path(p).is_file() for p in cf["images"].values())
            got = _json(await s.call_tool("get_result", {"key": cf["result_key"][:12]}))
            assert got["data"]["explanation_without"] == WITHOUT

            # -- refusals: each a tool error with the CLI's message, never a traceback
            async def error(name, args) -> str:
                r = await s.call_tool(name, args)
                text = text_of(r)
                assert r.is_error and text.startswith("error: ") and "Traceback" not in text, text
                return text

            estimator_dir = tmp_path / "estimator"  # a saved estimator folder outside the roots
            estimator_dir.mkdir()
            text = await error("analysis_competency_score", {"data": str(world["images"]), "classifier": clf,
                                                            "fitted": str(estimator_dir)})
            assert "outside the folders this server may use" in text
            text = await error("analysis_competency_estimator", {
                "data": str(world["images"]), "classifier": clf,
                "settings": {**FIT, "calibration_set": str(world["outside"])}})
            assert "outside the folders this server may use" in text and "calibration_set" in text
            text = await error("analysis_competency_cf", {"data": str(world["odd"]), "classifier": clf,
                                                         "fitted": "abcdef0123"})
            assert "No competency estimator is stored under 'abcdef0123'" in text
            assert "needs fitted" in await error("analysis_competency_cf", {"data": str(world["odd"]),
                                                                            "classifier": clf})
            assert "must be one of" in await error("analysis_competency_cf", {
                "data": str(world["odd"]), "classifier": clf, "fitted": key, "settings": {"methods": ["warp"]}})
    finally:
        endpoint.shutdown()
