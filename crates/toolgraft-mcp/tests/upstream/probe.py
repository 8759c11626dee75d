"""What an upstream MCP server really serves, seen by the official MCP Python SDK's
client: the time to its `initialize` answer, its capabilities, its tools (with
their annotations, and whether they declare an output schema) and the
notifications it sent; then, with --call, a tool's reply and the progress,
sampling, elicitation and roots requests it made on the way.

The client declares sampling, elicitation and roots (callbacks that answer at
once: a fixed text, decline, no roots), so a server that registers tools by the
client's capabilities (like server-everything) lists them all; --bare declares
none of them.

Usage (the venv's python, TOOLGRAFT_UPSTREAM_PYTHON of `scripts/setup --env`):
    probe.py [--bare] stdio COMMAND [ARG...] [--call NAME JSON]...
    probe.py [--bare] http URL [--call NAME JSON]... (UPSTREAM_TOKEN: sent as a bearer token)
"""

import asyncio
import json
import os
import sys
import time

import httpx2
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

EVENTS: list[str] = []
START = time.monotonic()


def event(what: str) -> None:
    line = f"+{(time.monotonic() - START) * 1000:7.1f} ms  {what}"
    EVENTS.append(line)
    print(line, flush=True)


async def on_message(message) -> None:
    if isinstance(message, Exception):
        event(f"transport error: {message!r}")
    else:
        event(f"notification {message.method} {json.dumps(message.params.model_dump(mode='json', by_alias=True, exclude_none=True)) if getattr(message, 'params', None) else ''}")


async def on_sampling(context, params: types.CreateMessageRequestParams):
    event(f"request sampling/createMessage {params.model_dump_json(by_alias=True, exclude_none=True)}")
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled by probe.py"), model="probe"
    )


async def on_elicitation(context, params):
    event(f"request elicitation/create {params.model_dump_json(by_alias=True, exclude_none=True)}")
    return types.ElicitResult(action="decline")


async def on_roots(context):
    event("request roots/list")
    return types.ListRootsResult(roots=[])


async def session_run(read, write, calls, bare) -> None:
    callbacks = {} if bare else dict(
        sampling_callback=on_sampling, elicitation_callback=on_elicitation, list_roots_callback=on_roots
    )
    async with ClientSession(read, write, message_handler=on_message, **callbacks) as session:
        began = time.monotonic()
        result = await session.initialize()
        event(f"initialize answered in {(time.monotonic() - began) * 1000:.1f} ms "
              f"({(time.monotonic() - START) * 1000:.1f} ms from start): "
              f"{result.server_info.name} {result.server_info.version}, protocol {result.protocol_version}")
        print("capabilities:", result.capabilities.model_dump_json(by_alias=True, exclude_none=True))
        await asyncio.sleep(0.5)  # notifications sent after `initialized` (list_changed, roots)
        tools = await session.list_tools()
        print(f"tools ({len(tools.tools)}):")
        for tool in tools.tools:
            a = tool.annotations
            hints = {k: v for k, v in (a.model_dump(by_alias=True, exclude_none=True) if a else {}).items()}
            print(json.dumps({
                "name": tool.name,
                "annotations": hints,
                "outputSchema": tool.output_schema is not None,
                **({"execution": tool.execution.model_dump(by_alias=True, exclude_none=True)}
                   if getattr(tool, "execution", None) else {}),
                "required": (tool.input_schema or {}).get("required", []),
                "properties": sorted((tool.input_schema or {}).get("properties", {})),
            }))
        for name, arguments in calls:
            async def on_progress(progress, total, message, name=name):
                event(f"progress {name}: {progress:g}/{total if total is None else format(total, 'g')} {message or ''}")
            event(f"call {name} {json.dumps(arguments)}")
            reply = await session.call_tool(name, arguments, progress_callback=on_progress)
            text = reply.model_dump_json(by_alias=True, exclude_none=True)
            event(f"reply {name}: {text[:600]}")
        await asyncio.sleep(0.2)


async def main(argv: list[str]) -> None:
    calls = []
    while "--call" in argv:
        at = argv.index("--call")
        calls.append((argv[at + 1], json.loads(argv[at + 2])))
        del argv[at:at + 3]
    bare = "--bare" in argv
    if bare:
        argv.remove("--bare")
    kind, rest = argv[0], argv[1:]
    if kind == "stdio":
        params = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            await session_run(read, write, calls, bare)
    elif kind == "http":
        headers = {}
        if os.environ.get("UPSTREAM_TOKEN"):
            headers["Authorization"] = f"Bearer {os.environ['UPSTREAM_TOKEN']}"
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            async with streamable_http_client(rest[0], http_client=http) as (read, write):
                await session_run(read, write, calls, bare)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
