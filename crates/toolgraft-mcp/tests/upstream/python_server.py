"""An upstream MCP server written with the official MCP Python SDK (pip `mcp`, the
version pinned in scripts/conformance.d/requirements.txt), for toolgraft-mcp's
client side to import tools from over Streamable HTTP.

mcp 2.x has no `mcp.server.fastmcp.FastMCP` any more (importing it raises, pointing
at the migration guide): it is `mcp.server.mcpserver.MCPServer`, used here.

Usage: python_server.py PORT   (the venv's python: TOOLGRAFT_UPSTREAM_PYTHON of
`scripts/setup --env`). Serves http://127.0.0.1:PORT/mcp (PORT 0: a free port);
once it accepts connections it prints to stderr

    python_server: MCP over HTTP at http://127.0.0.1:<port>/mcp

With UPSTREAM_TOKEN set, every request must carry `Authorization: Bearer
<UPSTREAM_TOKEN>`, else 401 (with `WWW-Authenticate: Bearer`).

Tools (annotations as listed; only describe declares an outputSchema, the
others answer text alone, structured_output=False):
    lookup(key) -> str        read-only, idempotent; counts its runs
    calls() -> int            read-only; how many times lookup ran
    bump(key) -> int          idempotent, not read-only, not destructive: sets
                              key's counter to a hash of key, returns it
    erase(key) -> str         destructive: forgets key's counter
    count_to(n) -> int        reports progress 1..n of n, then returns n
    sleep(ms) -> int          returns ms after ms milliseconds; cancelled
                              (notifications/cancelled), it stops at once
    sleeps() -> dict          read-only: sleep's started / finished / cancelled
    describe(key) -> Entry    read-only; declares an outputSchema and returns
                              structured content (a pydantic model)
    grow() -> str             adds the tool `grown` (once) and sends
                              notifications/tools/list_changed
    say(text, ms) -> str      read-only: logs "<text>: begun" (info), sleeps
                              ms milliseconds, logs "<text>: done", returns
                              text; the SDK sends the log messages on the
                              call's own response stream
"""

import asyncio
import functools
import sys
import os
import zlib

import uvicorn
from pydantic import BaseModel
from starlette.responses import JSONResponse

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("toolgraft-upstream-python", version="1.0.0")
# The SDK advertises tools.listChanged only when asked to (the Streamable HTTP
# manager takes the lowlevel server's default initialization options, which
# leave it false at the handshake versions); grow() sends it.
_lowlevel = server._lowlevel_server
_lowlevel.create_initialization_options = functools.partial(
    _lowlevel.create_initialization_options, NotificationOptions(tools_changed=True)
)

LOOKUP = ToolAnnotations(readOnlyHint=True, idempotentHint=True, destructiveHint=False)
READ = ToolAnnotations(readOnlyHint=True, idempotentHint=True)
IDEMPOTENT = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False)

LOOKUPS = 0
COUNTERS: dict[str, int] = {}
SLEEPS = {"started": 0, "finished": 0, "cancelled": 0}


@server.tool(annotations=LOOKUP, structured_output=False)
def lookup(key: str) -> str:
    """The value of key (the same for a key every time); counted in calls()."""
    global LOOKUPS
    LOOKUPS += 1
    return f"value of {key}"


@server.tool(annotations=READ, structured_output=False)
def calls() -> int:
    """How many times lookup ran."""
    return LOOKUPS


@server.tool(annotations=IDEMPOTENT, structured_output=False)
def bump(key: str) -> int:
    """Sets key's counter to a hash of key (so again is the same), returns it."""
    COUNTERS[key] = zlib.crc32(key.encode()) % 1000
    return COUNTERS[key]


@server.tool(annotations=DESTRUCTIVE, structured_output=False)
def erase(key: str) -> str:
    """Forgets key's counter."""
    had = COUNTERS.pop(key, None)
    return f"erased {key}" if had is not None else f"{key} was not there"


@server.tool(annotations=READ, structured_output=False)
async def count_to(n: int, ctx: Context) -> int:
    """Reports progress 1..n (of n), then returns n."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
        await asyncio.sleep(0.01)
    return n


@server.tool(annotations=READ, structured_output=False)
async def say(text: str, ms: int, ctx: Context) -> str:
    """Logs text (info) as it begins and after ms milliseconds, then returns it."""
    await ctx.info(f"{text}: begun")
    await asyncio.sleep(ms / 1000)
    await ctx.info(f"{text}: done")
    return text


@server.tool(annotations=READ, structured_output=False)
async def sleep(ms: int) -> int:
    """Returns ms after ms milliseconds. On notifications/cancelled the SDK cancels
    the call's scope (the default "interrupt" mode): the sleep stops at once and
    the request is never answered."""
    SLEEPS["started"] += 1
    try:
        await asyncio.sleep(ms / 1000)
    except asyncio.CancelledError:
        SLEEPS["cancelled"] += 1
        raise
    SLEEPS["finished"] += 1
    return ms


@server.tool(annotations=READ, structured_output=False)
def sleeps() -> dict[str, int]:
    """How many sleeps started, finished and were cancelled."""
    return dict(SLEEPS)


class Entry(BaseModel):
    key: str
    length: int
    counter: int | None


@server.tool(annotations=READ)
def describe(key: str) -> Entry:
    """key's length and its counter (structured output, with an outputSchema)."""
    return Entry(key=key, length=len(key), counter=COUNTERS.get(key))


def grown() -> str:
    """The tool grow() added."""
    return "grown"


@server.tool(annotations=IDEMPOTENT, structured_output=False)
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` (once) and sends notifications/tools/list_changed."""
    if "grown" not in {tool.name for tool in await server.list_tools()}:
        server.add_tool(grown, annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
    # Both: ctx.notify_tools_changed() publishes to `subscriptions/listen`
    # streams (protocol 2026-07-28) only; the session's notification reaches
    # a client of an older protocol.
    await ctx.notify_tools_changed()
    try:
        await ctx.session.send_tool_list_changed()
    except Exception:  # a 2026-07-28 request has no session to send on
        pass
    return "grew grown"


class BearerToken:
    """401 unless the request carries `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            response = JSONResponse(
                {"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def main(port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    token = os.environ.get("UPSTREAM_TOKEN")
    if token:
        app = BearerToken(app, token)
    # Stopped (SIGTERM), it waits at most a second for its clients to go.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve())
    while not http.started:
        if serving.done():
            await serving
            sys.exit("python_server: uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    bound = http.servers[0].sockets[0].getsockname()[1]
    print(f"python_server: MCP over HTTP at http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
    await serving


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1])))
