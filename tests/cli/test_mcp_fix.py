"""`analysis_fix` of `nemo mcp` over stdio (the SDK's own client, the real server in a child process) on the fix
loop's planted-shortcut world: the world's CNN and its editor double reach the server as a plugin distribution's
model families (fixtures_tiny/fix_world_plugin.py), the data as the train/affected/rest folder `nemo fix` reads.
The right finding's edit fixes the shortcut and the guard keeps it; a re-run is answered from the store; and the
refusals: an edit without an editor, a folder without its three sets, an editor outside the roots."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from fixtures_tiny.fix_world_plugin import save_world, write_fix_folder, write_fix_world_plugin  # noqa: E402
from fixtures_tiny.mcp_stdio import stdio_session, text_of  # noqa: E402

pytestmark = pytest.mark.anyio
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "fix"))
# The settings this plumbing test was written with (preservation 1): on the tiny world's 150 other images one image
# is 0.7 points, so whether the guard keeps the fix turns on one or two images, not on the MCP path.
FAST = {"per_class": 100, "epochs": 10, "patience": 3, "lr": 3e-3, "bootstrap": 200, "save": False, "mode": "full",
        "preserve": 1.0}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from fix_tiny_world import tiny_world

    root = tmp_path_factory.mktemp("mcp-fix")
    w = tiny_world()
    data = root / "data"
    bad = data / "incomplete"
    (bad / "train" / "zero").mkdir(parents=True)
    return {"world": w, "data": data, "model": save_world(w, data / "world"), "fix": write_fix_folder(w, data / "fix"),
            "bad": bad, "outside": save_world(w, root / "outside-world"), "site": write_fix_world_plugin(root / "site")}


def _json(result) -> dict:
    assert not result.is_error, text_of(result)
    return json.loads(result.content[0].text)


async def test_fix_a_planted_shortcut_through_mcp(world, tmp_path):
    w = world["world"]
    ref = f"fix-world:{world['model']}"
    args = {"data": str(world["fix"]), "classifier": ref, "editor": ref, "settings": {**FAST, **w.finding()}}
    async with stdio_session([world["data"]], tmp_path, extra_paths=[world["site"]]) as (s, _):
        schema = {t.name: t for t in (await s.list_tools()).tools}["analysis_fix"].input_schema
        assert "train/, affected/ and rest/" in schema["properties"]["data"]["description"]
        assert {"instruction", "mode", "per_class"} <= set(schema["properties"]["settings"]["properties"])

        out = _json(await s.call_tool("analysis_fix", args))
        d = out["data"]
        assert d["analysis"] == "fix" and out["result_key"]
        a = d["affected"]["overall"]
        assert a["n"] == len(w.affected) and a["before"] < 0.65 and a["change"] >= 30, d["guard"]
        assert d["rest"]["overall"]["n"] == len(w.rest)
        assert d["guard"]["verdict"] == "keep" and "n=" in d["guard"]["why"], d["guard"]["why"]
        assert {x["source"] for x in d["sources"]} == {"edit:remove", "edit:add"}
        again = _json(await s.call_tool("analysis_fix", args))
        assert again["result_key"] == out["result_key"] and again["data"]["affected"] == d["affected"]

        async def error(call_args) -> str:
            r = await s.call_tool("analysis_fix", call_args)
            text = text_of(r)
            assert r.is_error and text.startswith("error: ") and "Traceback" not in text, text
            return text

        no_editor = {k: v for k, v in args.items() if k != "editor"}
        assert "needs an image editor" in await error(no_editor)
        assert "no affected, rest folder" in await error({**args, "data": str(world["bad"])})
        assert "outside the folders" in await error({**args, "editor": f"fix-world:{world['outside']}"})
