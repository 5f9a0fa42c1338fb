"""MCP dataset analyses in process (the SDK's in-memory client on the real server object, so test doubles
registered in this process serve as models): index a dataset, then failure modes of the index, as an agent
would, on the bundled digits with a trained MLP classifier and a tiny random HF CLIP joint space."""
from __future__ import annotations

import csv
import json
import warnings

import pytest

pytest.importorskip("mcp")

from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder  # noqa: E402
from nemo_desktop.core.models import families as registry  # noqa: E402

pytestmark = pytest.mark.anyio
N = 120


@pytest.fixture
def world(tmp_path, monkeypatch):
    from fixtures_tiny.classifiers import build_tiny_clip

    X, y = load_digits_arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = DigitsMLPClassifier.train(X[N:], y[N:], hidden=8).mlp
    registry._ensure_builtin_families()
    monkeypatch.setitem(registry._FAMILIES, ("classifier", "test-digits"),
                        lambda spec, options: DigitsMLPClassifier(mlp, model_id=spec.model_id))
    data = tmp_path / "data"
    paths = write_digit_folder(data / "digits", X[:N], y[:N])
    manifest = data / "digits.csv"
    with open(manifest, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["path", "label", "parity"])
        for p, label in zip(paths, y[:N]):
            w.writerow([p.relative_to(data).as_posix(), str(label), "even" if int(label) % 2 == 0 else "odd"])
    sentences = data / "sentences.json"
    items = [{"text": f"a handwritten {p} digit", "requires": {"parity": p}} for p in ("even", "odd")]
    items += [{"text": f"a {d} drawn by hand", "requires": {"label": str(d)}} for d in range(10)]
    sentences.write_text(json.dumps({"name": "digits", "version": 1, "sentences": items}))
    outside = tmp_path / "elsewhere.json"
    outside.write_text(sentences.read_text())
    return {"data": data, "manifest": manifest, "sentences": sentences, "outside": outside,
            "clip": build_tiny_clip(tmp_path / "clip")}


def _json(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def test_index_then_failure_modes_through_mcp(world):
    from mcp import Client

    from nemo_desktop.mcp_server.server import NemoMCP, build_server

    server = build_server(NemoMCP([str(world["data"]), str(world["clip"])], device="cpu"))
    async with Client(server) as client:
        index = _json(await client.call_tool("index_dataset", {"dataset": str(world["manifest"]),
                                                               "classifier": "test-digits:plain"}))
        assert index["entries"] == N and index["index_id"]
        assert [i["index_id"] for i in _json(await client.call_tool("list_indexes", {}))["indexes"]] == \
            [index["index_id"]]
        settings = {"clusters": 3, "k": 2, "sentence_sets": [str(world["sentences"])], "relevance": "attributes",
                    "attributes_manifest": str(world["manifest"]), "split": "correctness"}
        args = {"data": index["index_id"], "embedder": f"hf-clip:{world['clip']}", "settings": settings}
        out = _json(await client.call_tool("analysis_failure_modes", args))
        d = out["data"]
        assert d["analysis"] == "failure-modes" and d["index"]["rows"] == N and out["result_key"]
        assert 1 <= len(d["groups"][0]["hard_clusters"]) <= 3
        got = _json(await client.call_tool("get_result", {"key": out["result_key"]}))
        assert got["kind"] and got["data"]["groups"] == d["groups"]

        bad = await client.call_tool("analysis_failure_modes", {**args, "settings": {
            **settings, "sentence_sets": [str(world["outside"])]}})
        assert bad.is_error and "outside the folders" in bad.content[0].text
        # a bare name is a set's name, not a path to confine: it reaches the analysis, which names the shipped sets
        bad = await client.call_tool("analysis_failure_modes", {**args, "settings": {
            **settings, "sentence_sets": ["no-such-set"]}})
        assert bad.is_error and "neither a shipped set nor a file" in bad.content[0].text, bad.content[0].text
        bad = await client.call_tool("analysis_failure_modes", {**args, "settings": {**settings, "k": 0}})
        assert bad.is_error and "at least 1" in bad.content[0].text
