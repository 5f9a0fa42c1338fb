"""The MCP SDK's own client on `nemo mcp` over stdio: the real server in a child process, as an agent starts it."""
from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Sequence

REPO = Path(__file__).resolve().parents[2]


def child_env(home: Path, extra_paths: Sequence[str | os.PathLike] = ()) -> dict[str, str]:
    """The server's environment: the repository, the tests' fixtures and `extra_paths` (plugin distributions)
    importable, its own NEMO_HOME, one torch thread (two threads on two shared cores spin against each other)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, extra_paths), str(REPO), str(REPO / "tests"),
                                         env.get("PYTHONPATH", "")])
    env["NEMO_HOME"] = str(home)
    env["OMP_NUM_THREADS"] = "1"
    return env


@asynccontextmanager
async def stdio_session(roots: Sequence[str | os.PathLike], workdir: Path, *extra: str,
                        extra_paths: Sequence[str | os.PathLike] = ()) -> AsyncIterator[tuple]:
    """(ClientSession, errlog) of `nemo mcp --root R ... --device cpu EXTRA`, run in `workdir` with its home
    there; errlog is the server's stderr (its log), readable after a flush."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    errlog = open(workdir / "server-stderr.txt", "w+")
    args = ["-m", "nemo_desktop.cli", "mcp", "--device", "cpu", *extra]
    for r in roots:
        args += ["--root", str(r)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(workdir),
                                   env=child_env(workdir / "home", extra_paths))
    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session, errlog
    finally:
        errlog.close()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
