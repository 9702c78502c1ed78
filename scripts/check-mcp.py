#!/usr/bin/env python3
"""The MCP server checked with a real MCP client: the official Python SDK (`mcp`).

Starts `agentsearch serve` on the embedded default (demo catalog and demo content) in a temporary
data directory, issues a user's JWT with `agentsearch token`, then over the streamable HTTP
transport at /mcp: initialize, list the tools (the four meta-tools, the context one with the query
document schema of the project's fields), call search_tools, call search_context with a typed query
(a date range on modifiedAt) as the token's user, read_context with a returned pointer, a malformed
call whose error names the nearest field, and an `identity` argument (refused: the token decides
who reads). Then the same client over stdio with `agentsearch mcp` bridging to the running server.
Every process is stopped at exit, on failure too; bounded to --timeout seconds.

Run it with the virtual environment of scripts/check-chart.sh (which installs `mcp`):
  /var/cache/agentsearch/venv/bin/python scripts/check-mcp.py
Environment: AGENTSEARCH_BIN (default $CARGO_TARGET_DIR/release/agentsearch), MODEL_DIR (default
models/all-MiniLM-L6-v2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import subprocess
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from serve_lib import DEMO_PROJECT, Failed, Served, run  # noqa: E402

USER = "alice@example.com"


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failed(what)


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def structured(result) -> dict:
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession, transport: str) -> None:
    await session.initialize()
    listed = await session.list_tools()
    names = sorted(t.name for t in listed.tools)
    check(
        names == ["get_tool", "read_context", "search_context", "search_tools"],
        f"{transport}: tools {names}",
    )
    context_tool = next(t for t in listed.tools if t.name == "search_context")
    schema = context_tool.input_schema
    check("queryDocument" in schema.get("$defs", {}), f"{transport}: no query document schema")
    check("modifiedAt" in json.dumps(schema), f"{transport}: modifiedAt not in the schema")

    found = await session.call_tool(
        "search_tools", {"query": "send a message to a channel", "topK": 3}
    )
    check(not found.is_error, f"{transport}: search_tools failed: {text_of(found)}")
    tools = structured(found)["tools"]
    check(0 < len(tools) <= 3, f"{transport}: search_tools returned {len(tools)} tools")

    typed = await session.call_tool(
        "search_context",
        {
            "query": {
                "v": 1,
                "q": "roadmap themes",
                "filter": {"type": "range", "field": "modifiedAt", "gte": "2026-01-01"},
                "countExactly": True,
                "highlight": True,
            },
            "topK": 3,
        },
    )
    check(not typed.is_error, f"{transport}: typed search_context failed: {text_of(typed)}")
    answer = structured(typed)
    results = answer["results"]
    check(len(results) > 0, f"{transport}: typed search_context found nothing: {answer}")
    check(answer["usage"].get("matched", 0) >= len(results), f"{transport}: usage {answer['usage']}")
    applied = answer["usage"]["identities"]["applied"]
    check(
        applied and all(principals == [USER] for principals in applied.values()),
        f"{transport}: searched as {applied}, not as the token's user",
    )
    pointer = results[0]["segments"][0]["pointer"]

    read = await session.call_tool("read_context", {"pointer": pointer, "before": 1, "after": 1})
    check(not read.is_error, f"{transport}: read_context failed: {text_of(read)}")
    segments = structured(read)["segments"]
    check(
        any(s.get("pointer") == pointer for s in segments),
        f"{transport}: read_context did not return the anchor passage",
    )

    bad = await session.call_tool(
        "search_context",
        {"query": {"v": 1, "filter": {"type": "term", "field": "titel", "value": "x"}}},
    )
    check(bad.is_error is True, f"{transport}: a misspelt field was accepted")
    check("did you mean `title`" in text_of(bad), f"{transport}: error says {text_of(bad)!r}")

    impersonate = await session.call_tool(
        "search_context", {"query": "budget", "identity": "bob@example.com"}
    )
    check(impersonate.is_error is True, f"{transport}: an identity argument was accepted")
    alias = await session.call_tool("read_context", {"pointer": pointer, "email": "bob@example.com"})
    check(alias.is_error is True, f"{transport}: an email argument was accepted")


async def over_http(base: str, token: str) -> None:
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(
            f"{base}/mcp?projectId={DEMO_PROJECT}", http_client=http
        ) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session, "http")


async def over_stdio(binary: str, base: str, token: str, env: dict) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--http", base, "--project", DEMO_PROJECT, "--token", token],
        env=env,
    )
    async with stdio_client(params) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")


def against(served: Served) -> None:
    token = subprocess.run(
        [served.binary, "token", "--user", USER, "--data-dir", str(served.data)],
        env=served.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    asyncio.run(asyncio.wait_for(over_http(served.base, token), served.remaining()))
    asyncio.run(
        asyncio.wait_for(
            over_stdio(served.binary, served.base, token, served.env), served.remaining()
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args()
    if run("check-mcp", args.timeout, against):
        return 1
    print("check-mcp: ok (http and stdio: initialize, list, search_tools, typed search_context, "
          "read_context, a misspelt field named, identity and email refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
