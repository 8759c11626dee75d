"""The official MCP Python SDK's client against the `gateway` example: a
toolgraft server whose tools are other servers' (the official server-everything
over stdio, the official server-filesystem over stdio, a Python SDK server over
HTTP with a bearer token) beside its own `shout`, with `approve` on every tool
not annotated read-only and `cache` on every read-only one, by the manifest's
`match` entries.

- tools/list: the upstreams' tools in their namespaces, with their annotations
  and the branches the manifest put on them.
- A destructive upstream tool (the filesystem server's `write_file`) through
  `approve`: the user accepts (the file is written), then declines (it is not).
- A read-only upstream tool answered from the cache (the Python server counts
  one lookup for three calls).
- With --oauth: an upstream the gateway reaches with a token it got by OAuth
  2.1's client credentials grant (the `authorized` example, as oidc.mjs's
  client `alice`): its `whoami` names alice.

Usage: python_gateway.py <url> <directory the filesystem server serves> [--oauth].
Prints the transcript; exits non-zero, saying what differed.
"""

import asyncio
import os
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python gateway: {what}")


def say(*parts: object) -> None:
    print("python gateway:", *parts)


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def hint(tool: types.Tool, name: str):
    annotations = tool.annotations.model_dump(by_alias=True) if tool.annotations else {}
    return annotations.get(name)


async def listing(session: ClientSession) -> None:
    tools = (await session.list_tools()).tools
    names = {tool.name for tool in tools}
    say(f"tools/list: {len(tools)} tools")
    for tool in sorted(tools, key=lambda tool: tool.name):
        say(
            f"  {tool.name:<46} readOnly={hint(tool, 'readOnlyHint')!s:<5} "
            f"destructive={hint(tool, 'destructiveHint')!s:<5} idempotent={hint(tool, 'idempotentHint')}"
        )
    for expected in [
        "shout_cache",
        "every_echo_cache",
        "fs_write_file_approve",
        "fs_read_text_file_cache",
        "py_erase_approve",
        "py_lookup_cache",
    ]:
        check(expected in names, f"{expected} is not listed: {sorted(names)}")
    check("fs_write_file_cache" not in names, "a cache on a destructive tool")


def answering(action: str):
    asked: list[str] = []

    async def callback(context, params):
        asked.append(params.message)
        content = {"approve": True} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)

    return callback, asked


async def write(url: str, directory: str, action: str) -> None:
    callback, asked = answering(action)
    path = os.path.join(directory, f"{action}.txt")
    async with streamable_http_client(url) as (read, write_stream):
        async with ClientSession(read, write_stream, elicitation_callback=callback) as session:
            await session.initialize()
            if action == "accept":
                await listing(session)
            result = await session.call_tool(
                "fs_write_file_approve", {"path": path, "content": "approved through toolgraft"}
            )
            say(f"[fs_write_file_approve, the user answers {action}] asked: {asked[0]!r}" if asked else "not asked")
            say(f"  -> isError={result.is_error} {text(result)[:100]!r}; file written: {os.path.exists(path)}")
            check(len(asked) == 1 and "fs_write_file" in asked[0], f"asked {asked}")
            if action == "accept":
                check(not result.is_error, f"accepted: {result}")
                with open(path) as written:
                    check(written.read() == "approved through toolgraft", "the file's text")
            else:
                check(result.is_error and "did not approve" in text(result), f"declined: {result}")
                check(not os.path.exists(path), "a declined write wrote the file")


async def cached(url: str) -> None:
    async with streamable_http_client(url) as (read, write_stream):
        async with ClientSession(read, write_stream) as session:
            await session.initialize()
            for _ in range(3):
                found = await session.call_tool("py_lookup_cache", {"key": "k"})
                check(text(found) == "value of k", f"lookup: {found}")
            calls = await session.call_tool("py_calls", {})
            say(f"[py_lookup_cache called 3 times] the Python server ran lookup {text(calls)} time(s)")
            check(text(calls) == "1", f"the cache did not answer: {calls}")


async def oauth(url: str) -> None:
    async with streamable_http_client(url) as (read, write_stream):
        async with ClientSession(read, write_stream) as session:
            await session.initialize()
            result = await session.call_tool("notes_whoami", {})
            say(f"[notes_whoami, an upstream reached with OAuth client credentials] -> {text(result)!r}")
            check(not result.is_error and "alice" in text(result), f"whoami: {result}")


async def main(url: str, directory: str, with_oauth: bool) -> None:
    await write(url, directory, "accept")
    await write(url, directory, "decline")
    await cached(url)
    if with_oauth:
        await oauth(url)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], "--oauth" in sys.argv[3:]))
