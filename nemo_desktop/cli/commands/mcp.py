"""`nemo mcp [--root DIR]... [--http [--http-host H] [--http-port N] [--token T]]`: serve NEMO Desktop's engine to
agents as Model Context Protocol tools (list models, predict, explain, every registered analysis, stored results,
reports), over stdio (default: what MCP clients start) or streamable HTTP on loopback.

Tools read and write files only inside the --root folders and the results store. HTTP binds 127.0.0.1 unless
--http-host names another address, which also needs a bearer token (--token or NEMO_MCP_TOKEN). Needs the `[mcp]`
extra: pip install 'nemo-desktop[mcp]'.
"""
from __future__ import annotations

import os


def register(subparsers) -> None:
    p = subparsers.add_parser("mcp", help="serve the engine to AI agents as MCP tools (stdio or local HTTP)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--root", action="append", default=[], metavar="DIR",
                   help="a folder the tools may read images, datasets and local models from and write reports "
                        "to (repeatable; default: none beyond the results store)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of "
                                                       "stdio")
    p.add_argument("--http-host", default="127.0.0.1", metavar="HOST",
                   help="HTTP address (default 127.0.0.1; any other needs a token)")
    p.add_argument("--http-port", type=int, default=8765, metavar="N", help="HTTP port (default 8765)")
    p.add_argument("--token", metavar="TOKEN",
                   help="bearer token HTTP clients must send (default: NEMO_MCP_TOKEN; prefer the variable, "
                        "a command line is visible to other users)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    p.set_defaults(func=run)


def run(args) -> int:
    from ...core.base.errors import ConfigError

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError("`nemo mcp` needs the MCP SDK, which is not installed.",
                          hint="pip install 'nemo-desktop[mcp]'") from None
    from ...core.base.secrets import register_secret
    from ...mcp_server.server import LOOPBACK, NemoMCP, run_http, run_stdio

    for root in args.root:
        if not os.path.isdir(os.path.expanduser(root)):
            raise ConfigError(f"--root {root} is not a folder.", hint="Give an existing folder.")
    token = args.token or os.environ.get("NEMO_MCP_TOKEN") or None
    if not args.http and (args.token or args.http_host != "127.0.0.1" or args.http_port != 8765):
        raise ConfigError("--http-host, --http-port and --token apply to --http only.",
                          hint="Add --http, or drop them.")
    if args.http and args.http_host not in LOOPBACK and not token:
        raise ConfigError(f"Serving on {args.http_host} (not loopback) needs a bearer token.",
                          hint="Set NEMO_MCP_TOKEN (or --token), or keep the default --http-host 127.0.0.1.")
    if token:
        register_secret(token)  # never in a log line or a tool result
    server = NemoMCP(args.root, device=args.device, dtype=args.dtype)
    if args.http:
        run_http(server, args.http_host, args.http_port, token)
    else:
        run_stdio(server)
    return 0
