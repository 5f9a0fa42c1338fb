"""The MCP server behind `nemo mcp` (the official SDK's low-level `Server`, stdio or streamable HTTP).

Tools (schemas derived from the catalog and the analysis registry, so a new config field or a plugin's analysis
appears without touching this file):

    list_models      catalog entries (shipped + user) with on-disk status, the model families, skipped plugins
    index_dataset    index a dataset with a classifier (the reference of explain, the data of failure modes)
    list_indexes     the reference indexes in the store
    list_analyses    every registered analysis with its components and settings
    predict          top-k classes of images
    explain          any explanation method (enum from the registry) on one image; settings from their configs
    analysis_<name>  one tool per other registered analysis (competency, failure modes, model differences,
                     global explanation, plugins' analyses), its components, data and settings from its spec
    list_images      the image files of a folder inside the roots, a page at a time
    get_result       a stored result by key (or prefix), optionally with its images as image content
    export_report    a stored result's or run's HTML/PDF report, written inside an allowed root

Long tools run in a worker thread: their JobContext progress becomes MCP progress notifications, and the
client's cancellation sets the job's cancel token (the job stops at its next check; completed steps stay
stored). Jobs run one at a time. Results are also resources, `nemo://result/<key>`.

Safety: every path a tool reads or writes (images, dataset folders, local model folders in `<family>:<source>`
references, report files) must lie inside a root given on the command line (`--root`, repeatable) or the
results store; nothing else is readable through a tool. The arguments are checked where they arrive, and while
a tool runs every file it opens is checked again after its links are resolved (`core/base/confine.py`): a dataset
member linked from outside, a CSV row naming a file outside, a file in a reference or estimator folder that
leads outside is refused, that file alone, with the reason (the rest of the batch goes on). Argument bounds in
the schemas (minimum, maximum, minItems, ...) are enforced, and a NUL byte in an argument is a path error. Bad
arguments come back as tool errors with the CLI's messages (`error: ...` / `hint: ...`), never tracebacks, and
every text is passed through the secret redactor.

Modules: tools.py (the tools), schemas.py (their input schemas and argument checks), roots.py (the file
access confinement), listing.py (list_images), replies.py (what the client reads back: content and errors,
redacted); this one serves them.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .replies import MAX_TEXT, RESULT_URI, ToolError, ToolOutput, _content, _error_text, _is_nemo_error
from .roots import Roots
from .schemas import ToolDef, _check_args, settings_schema
from .tools import _get_result, all_tools

__all__ = ["LOOPBACK", "MAX_TEXT", "RESULT_URI", "NemoMCP", "Roots", "ToolDef", "ToolError", "ToolOutput",
           "build_server", "run_http", "run_stdio", "settings_schema"]

log = logging.getLogger("nemo_desktop.mcp")


# -- the server ------------------------------------------------------------------------------------------------------
class NemoMCP:
    """The tools, resources and policies; `build_server()` wraps them in the SDK's Server."""

    def __init__(self, roots: list[str] | None = None, device: str = "auto", dtype: str = "auto") -> None:
        from ..core.store.paths import get_paths

        self.paths = get_paths().ensure()
        self.device, self.dtype = device, dtype
        self._roots_given = list(roots or [])
        self._job_lock = threading.Lock()
        self.roots = Roots.of(self._roots_given, self._store_dir())

    def user_roots(self) -> list[Path]:
        """The `--root` folders (resolved), without the results store."""
        return [Path(r).expanduser().resolve() for r in self._roots_given]

    def _store_dir(self) -> Path | None:
        from ..core.store import ResultsStore

        store = ResultsStore.open(self.paths)
        try:
            return Path(store.store_dir)
        finally:
            store.close()

    # -- tool list ----------------------------------------------------------------------------------------------
    def tools(self) -> list[ToolDef]:
        return all_tools()

    def tool(self, name: str) -> ToolDef:
        for t in self.tools():
            if t.name == name:
                return t
        raise ToolError(f"Unknown tool '{name}'.", hint="List the tools (tools/list).")

    # -- helpers the tools use ---------------------------------------------------------------------------------
    def model(self, ref: Any, what: str) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise ToolError(f"'{what}' must be a model id or <family>:<source>.")
        return self.roots.check_model_ref(ref.strip(), f"{what} model path")

    def condition_source(self, ref: str) -> str:
        """A condition source's files (an attribute dataset, a conditions file) must lie inside the roots."""
        kind, _, rest = ref.strip().partition(":")
        if kind == "dataset" and rest:
            self.roots.check(rest, "condition dataset")
        elif kind == "t2i" and rest:
            model, _, conditions = rest.partition("@")
            self.model(model, "text-to-image")
            if conditions:
                self.roots.check(conditions, "conditions file")
        return ref

    def call(self, name: str, args: dict[str, Any], ctx: Any = None) -> ToolOutput:
        """Run tool `name` as a client's call does (arguments checked, file access confined to the roots)."""
        from ..core.base.job_context import JobContext

        tool = self.tool(name)
        _check_args(tool, args)
        return self.run_tool(tool, args, ctx or JobContext())

    def run_tool(self, tool: ToolDef, args: dict[str, Any], ctx: Any) -> ToolOutput:
        """Every file the tool opens while it runs must resolve inside the roots (core/base/confine.py)."""
        from ..core.base.confine import confined

        with confined(self.roots.folders):
            return tool.run(self, args, ctx)

    def run_job(self, fn: Callable[[], Any], ctx: Any) -> Any:
        """Run one job at a time (models share one GPU); a cancelled job waiting here gives up at once."""
        while not self._job_lock.acquire(timeout=0.2):
            ctx.check_cancelled()
        try:
            return fn()
        finally:
            self._job_lock.release()


class _Progress:
    """JobContext progress (in the job thread) -> MCP progress notifications (in the server's event loop).

    MCP asks each notification's progress to be larger than the last, over the whole call. A report's `overall`
    (the call's fraction, where the job maps its sub-steps) is used as it is; a report without it only knows its
    own stage's fraction, which starts again at 0 for every stage (read as the call's, SciTX sent 0.01 and then
    100 for each of its 18 stages): it moves the value a step closer to the end instead. The value stays below
    100 until the call returns (its result is the end)."""

    CAP = 99.0
    CREEP = 0.02  # a report that knows nothing of the whole call: 2 % of the way left

    def __init__(self, session: Any) -> None:
        self.session = session
        self.last = 0.0
        self.sent_at = 0.0
        self.stage: str | None = None

    def next_value(self, p: Any) -> float:
        target = min(self.CAP, 100.0 * p.overall) if p.overall is not None else None
        if target is not None and target > self.last:
            return target
        return self.last + max((self.CAP - self.last) * self.CREEP, 1e-6)  # strictly more, even near the cap

    def __call__(self, p: Any) -> None:
        import anyio.from_thread

        now = time.monotonic()
        if p.stage == self.stage and now - self.sent_at < 0.25:
            return
        value = self.next_value(p)
        self.stage, self.sent_at, self.last = p.stage, now, value
        message = f"{p.stage} {p.done}/{p.total}" if p.total else p.stage
        try:
            anyio.from_thread.run(self.session.report_progress, value, 100.0, message)
        except Exception:  # noqa: BLE001 - the request is over (cancelled) or the client went away
            pass


def build_server(nemo: NemoMCP) -> Any:
    """The SDK's low-level Server with NEMO's handlers."""
    import anyio
    import anyio.to_thread
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from .. import __version__
    from ..core.base.errors import JobCancelled
    from ..core.base.job_context import JobContext

    async def list_tools(ctx: Any, params: Any) -> Any:
        tools = []
        for t in await anyio.to_thread.run_sync(nemo.tools):
            tools.append(types.Tool(name=t.name, description=t.description, input_schema=t.schema,
                                    annotations=types.ToolAnnotations(read_only_hint=t.read_only,
                                                                      open_world_hint=False)))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, args = params.name, dict(params.arguments or {})
        job = JobContext(on_progress=_Progress(ctx.session))
        try:
            tool = await anyio.to_thread.run_sync(nemo.tool, name)
            _check_args(tool, args)
            started = time.monotonic()
            try:
                output = await anyio.to_thread.run_sync(_run_tool, nemo, tool, args, job, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                job.cancel_token.cancel()
                log.warning("%s: cancelled by the client after %.1f s; the job stops after its current step",
                            name, time.monotonic() - started)
                raise
            return types.CallToolResult(content=_content(output))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a tool error the agent can read
            if not isinstance(exc, (ToolError,)) and not _is_nemo_error(exc):
                log.error("%s failed", name, exc_info=True)  # the traceback goes to the log file only
            return types.CallToolResult(content=[types.TextContent(type="text", text=_error_text(exc))],
                                        is_error=True)

    def _run_tool(server: NemoMCP, tool: ToolDef, args: dict[str, Any], job: Any) -> ToolOutput:
        try:
            return server.run_tool(tool, args, job)
        except JobCancelled:
            log.warning("%s: job stopped (cancelled)", tool.name)
            raise

    async def list_resources(ctx: Any, params: Any) -> Any:
        def recent() -> list[Any]:
            from ..core.store import ResultsStore

            store = ResultsStore.open(nemo.paths)
            try:
                return store.find(limit=50)
            finally:
                store.close()

        rows = await anyio.to_thread.run_sync(recent)
        return types.ListResourcesResult(resources=[
            types.Resource(uri=f"{RESULT_URI}{r.key}", name=f"{r.kind} {r.key[:12]}", mime_type="application/json",
                           description=f"stored {r.kind} result") for r in rows])

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=RESULT_URI + "{key}", name="result", mime_type="application/json",
                                   description="A stored result (explanation, analysis) by its key")])

    async def read_resource(ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError

        from ..core.base.secrets import redact

        uri = str(params.uri)
        if not uri.startswith(RESULT_URI):
            raise MCPError(code=-32602, message=f"Unknown resource {uri}; resources are {RESULT_URI}<key>.")
        try:
            out = await anyio.to_thread.run_sync(_get_result, nemo, {"key": uri[len(RESULT_URI):]}, None)
        except Exception as exc:  # noqa: BLE001
            raise MCPError(code=-32002, message=_error_text(exc)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="application/json", text=redact(json.dumps(out.data, ensure_ascii=False,
                                                                         default=str)))])

    return Server("nemo-desktop", version=__version__, title="NEMO Desktop",
                  instructions="Explain why a vision classifier got an image wrong, and test each explanation. "
                               "Start with list_models; explain returns a result key, readable with get_result "
                               "or as the resource nemo://result/<key>.",
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


def run_stdio(nemo: NemoMCP) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(nemo)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def run_http(nemo: NemoMCP, host: str, port: int, token: str | None) -> None:
    """Streamable HTTP at http://host:port/mcp. A token, when set, is required as `Authorization: Bearer`."""
    import hmac

    import uvicorn

    server = build_server(nemo)
    app = server.streamable_http_app(host=host)
    if token:
        inner = app
        expected = f"Bearer {token}".encode()

        async def app(scope, receive, send):  # type: ignore[no-redef]
            if scope["type"] == "http":
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, expected):
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                    await send({"type": "http.response.body", "body": b"A bearer token is required.\n"})
                    return
            await inner(scope, receive, send)

    uvicorn.run(app, host=host, port=port, log_level="warning")
