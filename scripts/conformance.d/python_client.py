"""The official MCP Python SDK's client against the `mcp_server` example over
Streamable HTTP: what a Python agent sees of a toolgraft server.

Usage: python_client.py <url>. Exits non-zero, saying what differed, on the first
check that fails; prints one line per check that passes.
"""

import asyncio
import logging
import sys

from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client


class Warnings(logging.Handler):
    """The SDK's warnings (a failed session termination, a stream it could not
    read): a server it warns about is one its users see warnings from."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python client: {what}")


async def one_session(url: str, calls: int) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for n in range(calls):
                result = await session.call_tool("translate_cache", {"text": f"hi {n}", "to": "pt", "exp": 60})
                check(not result.is_error, f"translate_cache failed: {result}")
                check(result.content[0].text == f"[pt] hi {n}", f"translate_cache answered {result.content}")


async def main(url: str) -> None:
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "toolgraft-weather", f"server info {init.server_info}")
            print(f"python client: initialized, protocol {init.protocol_version}")

            names = sorted(tool.name for tool in (await session.list_tools()).tools)
            for name in ["translate", "translate_cache", "weather", "weather_trace_cache", "weather_batch_pool"]:
                check(name in names, f"`{name}` not listed: {names}")
            print(f"python client: {len(names)} tools listed")

            result = await session.call_tool("translate", {"text": "hi", "to": "pt"})
            check(not result.is_error and result.content[0].text == "[pt] hi", f"translate: {result}")
            forecast = await session.call_tool("weather_trace_cache", {"city": "Lisbon", "exp": 60})
            check(not forecast.is_error, f"weather_trace_cache: {forecast}")
            check(forecast.structured_content["city"] == "Lisbon", f"structured: {forecast.structured_content}")
            print("python client: calls answered, structured where the tool has an output schema")

            failed = await session.call_tool("weather", {"city": " "})
            check(failed.is_error is True, f"a failing body is an error result: {failed}")
            check("a city is required" in failed.content[0].text, f"its message: {failed.content}")
            for name, arguments in [("weather", {"town": "Lisbon"}), ("no_such_tool", {})]:
                try:
                    await session.call_tool(name, arguments)
                    check(False, f"{name} {arguments}: no error")
                except MCPError as error:
                    check(error.error.code == -32602, f"{name}: code {error.error.code}")
            print("python client: a failing body is isError, bad arguments and unknown names -32602")

    await asyncio.gather(*(one_session(url, 25) for _ in range(8)))
    print("python client: 8 sessions at once, 25 calls each")

    check(not warnings.seen, f"the SDK warned: {warnings.seen}")
    print("python client: no warnings from the SDK (sessions ended cleanly)")


asyncio.run(main(sys.argv[1]))
