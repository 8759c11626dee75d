"""How long an upstream MCP server takes from its start to its first `initialize`
answer, by plain JSON-RPC (the standard library only, no SDK in the way).

Usage: startup.py [-n RUNS] stdio COMMAND [ARG...]
       startup.py [-n RUNS] http URL COMMAND [ARG...]
In the http form `{port}` in URL and in the arguments is a free loopback port,
also passed as the environment's PORT; the request is retried every 5 ms until
the server answers. Prints each run's time and the median.
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "startup.py", "version": "0"},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stdio_once(command: list[str]) -> float:
    began = time.monotonic()
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        child.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        child.stdin.flush()
        for line in child.stdout:
            if json.loads(line).get("id") == 1:
                return time.monotonic() - began
        raise SystemExit(f"startup.py: {command[0]} closed its output before answering")
    finally:
        child.kill()
        child.wait()


def http_once(url: str, command: list[str]) -> float:
    port = str(free_port())
    url = url.replace("{port}", port)
    command = [arg.replace("{port}", port) for arg in command]
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if os.environ.get("UPSTREAM_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['UPSTREAM_TOKEN']}"
    began = time.monotonic()
    child = subprocess.Popen(command, env={**os.environ, "PORT": port},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - began < 30:
            request = urllib.request.Request(url, json.dumps(INITIALIZE).encode(), headers)
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    body = response.read().decode()
                    if '"id":1' in body.replace(" ", ""):
                        return time.monotonic() - began
                    raise SystemExit(f"startup.py: unexpected answer {body[:200]}")
            except (urllib.error.URLError, ConnectionError):
                if child.poll() is not None:
                    raise SystemExit(f"startup.py: {command[0]} exited with {child.returncode}")
                time.sleep(0.005)
        raise SystemExit("startup.py: no answer in 30 s")
    finally:
        child.kill()
        child.wait()


def main(argv: list[str]) -> None:
    runs = 5
    if argv[:1] == ["-n"]:
        runs, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["stdio"]:
        once = lambda: stdio_once(argv[1:])  # noqa: E731
    elif argv[:1] == ["http"]:
        once = lambda: http_once(argv[1], argv[2:])  # noqa: E731
    else:
        sys.exit(__doc__)
    times = [once() * 1000 for _ in range(runs)]
    print(f"{' '.join(f'{t:.0f}' for t in times)} ms; median {statistics.median(times):.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
