"""A worker process for the crash tests. Its workflow's every step appends
"<workflow id> <step>" to the file EFFECTS_FILE, so that the test counts
executions outside the process. It prints "ready" once launched, "ran <id>
<n>" after a step's side effect, "blocking <id> <n>" before hanging forever
in step BLOCK_AT, and "paused <id> <n>" before waiting in step PAUSE_AT for a
"go" line on stdin. It exits when stdin closes. The agent's socket comes from
env DBOS_AGENT_SOCKET, as an application's would."""

import logging
import os
import sys
import threading
from typing import List

from dbos_agent import DBOS, Queue

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")

EFFECTS = os.environ["EFFECTS_FILE"]
BLOCK_AT = int(os.environ.get("BLOCK_AT", "0"))
PAUSE_AT = int(os.environ.get("PAUSE_AT", "0"))
go = threading.Event()

Queue("crash_queue")


@DBOS.step()
def effect_step(n: int) -> int:
    wid = DBOS.workflow_id
    if n == BLOCK_AT:
        print(f"blocking {wid} {n}", flush=True)
        threading.Event().wait()  # until SIGKILL
    if n == PAUSE_AT:
        print(f"paused {wid} {n}", flush=True)
        go.wait()
    with open(EFFECTS, "a") as f:
        f.write(f"{wid} {n}\n")
    print(f"ran {wid} {n}", flush=True)
    return n * 10


@DBOS.workflow()
def crash_pipeline(steps: int) -> List[int]:
    return [effect_step(i) for i in range(1, steps + 1)]


@DBOS.workflow(max_recovery_attempts=1)
def fragile_pipeline(steps: int) -> List[int]:
    return [effect_step(i) for i in range(1, steps + 1)]


if __name__ == "__main__":
    DBOS(config={"name": "crash-test"})
    DBOS.launch()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "go":
            go.set()
    DBOS.destroy()
