"""One Python variant of BenchmarkTransports (e2e/transports_bench_test.go).

Runs the 10-step workload with either the official DBOS Python (``--sdk
dbos``) or the dbos-agent binding (``--sdk dbos_agent``), which share one
API: only the import differs. Which transport the binding uses (the socket or
libdbos.so in one of its modes) is the environment's business
(DBOS_AGENT_SOCKET, DBOS_AGENT_LIBRARY, DBOS_AGENT_MODE), set by the driver.

The process launches once and then serves measurements, so that the driver
can interleave the variants without paying a launch per measurement. Each
line on stdin is a JSON command; each answer is one stdout line starting with
``BENCH `` (whatever else the SDKs print is ignored):

    {"concurrency": 16, "seconds": 3.0, "latencies": false}
      -> BENCH {"elapsed_s": ..., "workflows": ..., "steps": ..., "step_us": [...]}
    {"quit": true}
      -> the process destroys DBOS and exits

``step_us`` is every step call's duration (the call from inside the workflow
to the step's return, which includes recording it), given when asked for.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys
import threading
import time
from typing import Any

STEPS_PER_WORKFLOW = 10


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sdk", choices=["dbos", "dbos_agent"], required=True)
    parser.add_argument("--database-url", required=True, help="the system database (DBOS Python; the library's embedded mode)")
    args = parser.parse_args()

    sdk: Any = importlib.import_module(args.sdk)
    DBOS = sdk.DBOS

    # Where the workflow in flight puts its step latencies: one list per
    # measurement, appended to by the workflow's own thread (list.append is
    # atomic under the GIL).
    recording: dict[str, list[float]] = {"step_us": []}
    record = {"on": False}

    @DBOS.step()  # type: ignore[untyped-decorator]
    def step(i: int) -> str:
        return "x"

    @DBOS.workflow()  # type: ignore[untyped-decorator]
    def ten_steps() -> str:
        if record["on"]:
            out = recording["step_us"]
            for i in range(STEPS_PER_WORKFLOW):
                t0 = time.perf_counter()
                step(i)
                out.append((time.perf_counter() - t0) * 1e6)
        else:
            for i in range(STEPS_PER_WORKFLOW):
                step(i)
        return "x"

    config: dict[str, Any] = {"name": "bench", "system_database_url": args.database_url, "run_admin_server": False}
    if args.sdk == "dbos":
        config["log_level"] = "WARNING"
    DBOS(config=config)
    DBOS.launch()

    def run(concurrency: int, seconds: float) -> tuple[float, int]:
        """Workflows with concurrency of them in flight (one thread each,
        calling the workflow function as an application does), started until
        seconds have passed: the seconds until the last one ended, and how
        many ran."""
        lock = threading.Lock()
        done = [0]
        errors: list[Exception] = []
        deadline = time.perf_counter() + seconds

        def worker() -> None:
            n = 0
            try:
                while time.perf_counter() < deadline and not errors:
                    if ten_steps() != "x":
                        raise RuntimeError("workflow returned something else")
                    n += 1
            except Exception as e:  # noqa: BLE001 (reported to the driver, which fails the variant)
                errors.append(e)
            with lock:
                done[0] += n

        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        if errors:
            raise errors[0]
        return elapsed, done[0]

    package = {"dbos": "dbos", "dbos_agent": "dbos-agent"}[args.sdk]
    print("BENCH " + json.dumps({"ready": True, "version": f"{package} {importlib.metadata.version(package)}"}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        concurrency = int(cmd["concurrency"])
        recording["step_us"] = []
        record["on"] = bool(cmd.get("latencies"))
        try:
            elapsed, n = run(concurrency, float(cmd["seconds"]))
        finally:
            record["on"] = False
        answer: dict[str, Any] = {"elapsed_s": elapsed, "workflows": n, "steps": n * STEPS_PER_WORKFLOW}
        if cmd.get("latencies"):
            answer["step_us"] = recording["step_us"]
        print("BENCH " + json.dumps(answer), flush=True)
    DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
