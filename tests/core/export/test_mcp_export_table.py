"""The per-image table from the MCP server (issue 44): the real server over stdio writes the demo's table into its
roots, and refuses a file outside them."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pq = pytest.importorskip("pyarrow.parquet")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_findings import demo_findings  # noqa: E402
from fixtures_tiny.mcp_stdio import stdio_session, text_of  # noqa: E402

pytestmark = pytest.mark.anyio


async def test_export_table_tool_writes_the_table_inside_the_roots(tmp_path):
    found = demo_findings()
    shutil.copytree(found.store_dir, tmp_path / "home" / "store")  # the server's NEMO_HOME is workdir/home
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    async with stdio_session([found.dataset_dir, out_dir], tmp_path) as (s, _):
        tools = {t.name for t in (await s.list_tools()).tools}
        assert "export_table" in tools
        res = await s.call_tool("export_table", {"dataset": str(found.dataset_dir), "classifier": found.classifier_id,
                                                 "path": str(out_dir / "t.parquet")})
        assert not res.is_error, text_of(res)
        done = json.loads(res.content[0].text)
        assert done["rows"] == 360 and done["metadata"]["index_id"] == found.index_id
        assert pq.read_metadata(out_dir / "t.parquet").num_rows == 360
        refused = await s.call_tool("export_table", {"dataset": found.index_id, "path": str(tmp_path / "t.csv")})
        assert refused.is_error and not (tmp_path / "t.csv").exists()
