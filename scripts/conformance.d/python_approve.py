"""The official MCP Python SDK's client as the user's side of `approve`, against
the `everything` example over Streamable HTTP: its tool `wipe` runs on a pool
thread once the caller's user approves.

- Protocol 2025-11-25 (initialize): the server asks by elicitation; the SDK's
  elicitation callback accepts once and declines once.
- Protocol 2026-07-28 (server/discover): the server answers with an
  input-required result (an elicitation and a sealed request state); the client
  calls again with the answer: accepted; the same answer again (replayed), with
  a changed state (tampered) and for another disk (mismatched) are refused.
- A client that declared no elicitation is refused (fail closed).

Usage: python_approve.py <url>. Prints the transcript; exits non-zero, saying
what differed.
"""

import asyncio
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python approve: {what}")


def say(*parts: object) -> None:
    print("python approve:", *parts)


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def answering(action: str):
    asked: list[str] = []

    async def callback(context, params):
        asked.append(params.message)
        content = {"approve": True} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)

    return callback, asked


async def legacy(url: str, action: str) -> None:
    callback, asked = answering(action)
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            result = await session.call_tool("wipe", {"disk": "sda"})
            say(f"[2025-11-25, elicitation, user answers {action}] asked: {asked[0]!r}" if asked else "not asked")
            say(f"  -> isError={result.is_error} {text(result)!r}")
            check(len(asked) == 1 and "Tool: wipe\n" in asked[0] and '"disk":"sda"' in asked[0], f"asked {asked}")
            if action == "accept":
                check(not result.is_error and "wiped sda on toolgraft-pool" in text(result), f"accepted: {result}")
            else:
                check(result.is_error and "did not approve" in text(result), f"declined: {result}")


async def modern(url: str) -> None:
    callback, asked = answering("accept")
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.discover()
            say(f"[{session.protocol_version}, input-required]")
            first = await session.call_tool("wipe", {"disk": "sda"}, allow_input_required=True)
            check(isinstance(first, types.InputRequiredResult), f"expected an input-required result: {first}")
            request = first.input_requests["approve"]
            say(f"  call 1 -> resultType=input_required, inputRequests.approve: {request.method} {request.params.message!r}")
            state = first.request_state
            say(f"  requestState: {state[:48]}... ({len(state)} chars)")
            yes = {"approve": types.ElicitResult(action="accept", content={"approve": True})}

            async def again(disk: str, state: str):
                return await session.call_tool(
                    "wipe", {"disk": disk}, input_responses=yes, request_state=state, allow_input_required=True
                )

            tampered = state[:-6] + ("AAAAAA" if not state.endswith("AAAAAA") else "BBBBBB")
            mismatched = await again("sdb", state)
            say(f"  call 2, disk sdb with that state -> isError={mismatched.is_error} {text(mismatched)!r}")
            check(mismatched.is_error and "other arguments" in text(mismatched), f"mismatched: {mismatched}")
            forged = await again("sda", tampered)
            say(f"  call 3, state tampered -> isError={forged.is_error} {text(forged)!r}")
            check(forged.is_error and "tampered" in text(forged), f"tampered: {forged}")
            accepted = await again("sda", state)
            say(f"  call 4, accept with the state -> isError={accepted.is_error} {text(accepted)!r}")
            check(not accepted.is_error and "wiped sda on toolgraft-pool" in text(accepted), f"accepted: {accepted}")
            replayed = await again("sda", state)
            say(f"  call 5, the same again (replay) -> isError={replayed.is_error} {text(replayed)!r}")
            check(replayed.is_error and "used already" in text(replayed), f"replayed: {replayed}")
            check(not asked, f"the input-required path asks by result, not by request: {asked}")


async def cannot_ask(url: str) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("wipe", {"disk": "sda"})
            say(f"[no elicitation declared] -> isError={result.is_error} {text(result)!r}")
            check(result.is_error and "cannot ask its user" in text(result), f"fail closed: {result}")


async def main(url: str) -> None:
    await legacy(url, "accept")
    await legacy(url, "decline")
    await modern(url)
    await cannot_ask(url)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
