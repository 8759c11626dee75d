"""One trace from the official MCP Python SDK's client to a worker process: the
`traced` example (crate toolgraft-jobs, feature otel) serves `forecast`, which
is `[proxy, remote, retry, timeout]`, over Streamable HTTP, its body on a worker
process; both export their spans over OTLP/HTTP to the `otlp_receiver` example
(a loopback receiver on the OpenTelemetry project's protocol crate), which
prints each span it decodes as a JSON line. The client sends `traceparent` in
the request's `_meta` (SEP-414); the trace is printed as the receiver stored it
(names, ids, parents, durations), as an indented tree, and checked: the
worker's spans are in the client's trace and descend from the client's span,
the queue wait starts before the job, progress is an event on the job's span.

On each tier: SQLite (a file in a temp directory) and Redis (the server named
by TOOLGRAFT_REDIS_URL, else a redis-server of its own on a free port when one
is installed, else the tier is skipped, saying so).

Usage: python_otel.py <otlp_receiver executable> <traced executable>. Exits
non-zero, saying what differed.
"""

import asyncio
import json
import os
import queue
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

QUEUE = "forecasts"


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python otel: {what}")


class Process:
    """A child whose stderr lines are kept, and whose stdout lines go to `on_line`."""

    def __init__(self, args, env=None, on_line=None):
        self.lines: list[str] = []
        self.child = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        threading.Thread(target=self._read, args=(self.child.stderr, self.lines.append), daemon=True).start()
        threading.Thread(target=self._read, args=(self.child.stdout, on_line or (lambda _: None)), daemon=True).start()

    @staticmethod
    def _read(stream, keep):
        for line in stream:
            keep(line.rstrip("\n"))

    def wait_for(self, prefix: str, within: float = 30.0) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            check(self.child.poll() is None, f"{self.child.args[0]} exited:\n" + "\n".join(self.lines))
            time.sleep(0.02)
        sys.exit(f"python otel: no `{prefix}` from {self.child.args}:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        if self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(5)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def call(url: str, traceparent: str) -> None:
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(
                "forecast", {"city": "Lisbon"}, progress_callback=on_progress,
                meta={"traceparent": traceparent},
            )
    check(not result.is_error, f"the call failed: {result}")
    print(f"python otel: answered {result.content[0].text}; progress {progress}")


def tree(spans: list[dict], client_span: str) -> list[str]:
    """The trace as an indented tree under the client's span."""
    children: dict[str, list[dict]] = {}
    for span in spans:
        children.setdefault(span["parent_span_id"], []).append(span)
    lines = [f"{client_span}  (the client's span: the traceparent's parent-id)"]

    def walk(parent: str, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda span: span["start_unix_nano"]):
            ms = (span["end_unix_nano"] - span["start_unix_nano"]) / 1e6
            events = [event["name"] for event in span["events"]]
            lines.append(
                f"{'  ' * depth}{span['name']}  [{span['service']}, {span['kind']}]  "
                f"span {span['span_id']} parent {span['parent_span_id']}  {ms:.2f} ms"
                + (f"  events {events}" if events else "")
            )
            walk(span["span_id"], depth + 1)

    walk(client_span, 1)
    # Spans of the trace whose parent was not received (none, when it is whole).
    received = {span["span_id"] for span in spans}
    for span in spans:
        if span["parent_span_id"] not in received and span["parent_span_id"] != client_span:
            lines.append(f"  ? orphan {span['name']} (parent {span['parent_span_id']} not received)")
    return lines


def descends(span: dict, ancestor: str, by_id: dict[str, dict]) -> bool:
    seen = set()
    parent = span["parent_span_id"]
    while parent and parent not in seen:
        if parent == ancestor:
            return True
        seen.add(parent)
        parent = by_id.get(parent, {}).get("parent_span_id", "")
    return False


def tier(name: str, jobs: str, traced: str, endpoint: str, spans: list[dict], lock: threading.Lock) -> None:
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="50")
    env.pop("OTEL_SERVICE_NAME", None)
    worker = Process([traced, "worker", "--jobs", jobs], env)
    server = Process([traced, "http", "--port", "0", "--jobs", jobs], env)
    try:
        url = server.wait_for("traced: MCP over HTTP at ")
        worker.wait_for("traced: worker pid ")
        trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
        started = time.monotonic()
        asyncio.run(call(url, f"00-{trace_id}-{client_span}-01"))
        answered = time.monotonic() - started

        def ours() -> list[dict]:
            with lock:
                return [span for span in spans if span["trace_id"] == trace_id]

        # The processes send their batches apart: wait for the worker's spans,
        # and for every parent in the trace (the server's come after).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            trace = ours()
            names = {span["name"] for span in trace}
            ids = {span["span_id"] for span in trace} | {client_span}
            if {f"process {QUEUE}", f"wait {QUEUE}"} <= names and all(
                    span["parent_span_id"] in ids for span in trace):
                break
            time.sleep(0.02)
        trace = ours()
        print(f"\n== {name} ({jobs}): the call took {answered * 1000:.0f} ms; trace {trace_id}, "
              f"{len(trace)} spans as the receiver stored them")
        for line in tree(trace, client_span):
            print("  " + line)
        by_id = {span["span_id"]: span for span in trace}
        job = [span for span in trace if span["name"] == f"process {QUEUE}"]
        wait = [span for span in trace if span["name"] == f"wait {QUEUE}"]
        check(len(job) == 1 and len(wait) == 1, f"{name}: one job span and one queue wait, not {trace}")
        job, wait = job[0], wait[0]
        workers = [span for span in trace if span["service"] == "traced-worker"]
        check(job["service"] == "traced-worker" and job["kind"] == "consumer", f"{name}: {job}")
        for span in workers:
            check(descends(span, client_span, by_id),
                  f"{name}: the worker's `{span['name']}` does not descend from the client's span")
        with lock:
            elsewhere = [s for s in spans if s["service"] == "traced-worker" and s["trace_id"] != trace_id
                         and s["attributes"].get("messaging.message.id") == job["attributes"]["messaging.message.id"]]
        check(not elsewhere, f"{name}: the job has spans in another trace: {elsewhere}")
        check(wait["start_unix_nano"] <= job["start_unix_nano"], f"{name}: the wait starts after the job")
        check(wait["parent_span_id"] == job["parent_span_id"], f"{name}: the wait and the job have one parent")
        check(any(event["name"] == "toolgraft.job.progress" for event in job["events"]),
              f"{name}: no progress event on the job span: {job['events']}")
    finally:
        server.stop()
        worker.stop()


def main(receiver_exe: str, traced: str) -> None:
    spans: list[dict] = []
    lock = threading.Lock()

    def keep(line: str) -> None:
        with lock:
            spans.append(json.loads(line))

    receiver = Process([receiver_exe, "0"], on_line=keep)
    redis = None
    work = tempfile.mkdtemp(prefix="toolgraft-otel.")
    try:
        endpoint = receiver.wait_for("otlp_receiver: OTLP/HTTP at ")
        print(f"python otel: the OTLP receiver is {endpoint}")
        tiers = [("sqlite", f"sqlite://{work}/jobs.db")]
        redis_url = os.environ.get("TOOLGRAFT_REDIS_URL")
        if not redis_url and shutil.which("redis-server"):
            port = free_port()
            redis = subprocess.Popen(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 10
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                check(time.monotonic() < deadline, "redis-server did not start")
                time.sleep(0.02)
            redis_url = f"redis://127.0.0.1:{port}"
        if redis_url:
            tiers.append(("redis", redis_url))
        else:
            print("python otel: the Redis tier is skipped: no TOOLGRAFT_REDIS_URL and no redis-server")
        for name, jobs in tiers:
            tier(name, jobs, traced, endpoint, spans, lock)
    finally:
        receiver.stop()
        if redis is not None:
            redis.terminate()
            redis.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
