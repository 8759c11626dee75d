"""The official MCP Python SDK's client against the `everything` example over
Streamable HTTP: a tool whose body runs on a pool thread sends progress, and the
Python client's progress callback sees the reports in order, the last one
before the reply (a report made while the previous is still being sent may be
folded into the next, as the server's progress fold does under load).

Usage: python_progress.py <url>. Exits non-zero, saying what differed; prints
each report with the time it arrived.
"""

import asyncio
import sys
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python progress: {what}")


async def main(url: str) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            start = time.monotonic()
            seen: list[tuple[float, float, float | None, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((time.monotonic() - start, progress, total, message))

            result = await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            answered = time.monotonic() - start
            check(not result.is_error, f"the call failed: {result}")
            for at, progress, total, message in seen:
                print(f"python progress: +{at * 1000:6.1f} ms  {progress:g}/{total:g}  {message}")
            print(f"python progress: +{answered * 1000:6.1f} ms  reply: {result.content[0].text}")
            # Reports are folded: one made while the last is still on its way
            # is replaced by a newer one (on a loaded machine, 0 by 50). So
            # each arrives in order, none is made up, and the last arrives.
            values = [p for _, p, _, _ in seen]
            check(values == sorted(set(values)) and set(values) <= {0, 50, 100}
                  and values[-1:] == [100], f"progress {seen}")
            # The pool names its worker threads so.
            check("toolgraft-pool" in result.content[0].text,
                  f"the body did not run on a pool thread: {result.content[0].text}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
