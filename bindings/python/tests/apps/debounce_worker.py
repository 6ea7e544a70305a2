"""A worker process for the debounce crash test. ``debounce_parent``
debounces ``debounce_target`` twice from workflow code (the first call
creates the debounced workflow inside ``SetWorkflowTimeout(30)``, the second
bounces it), then runs ``debounce_gate``, which with BLOCK=1 prints
"blocking <id>" and hangs until SIGKILL. ``debounce_target`` appends
"<id> <x>" to EFFECTS_FILE each time it runs. It prints "ready" once
launched and exits when stdin closes."""

import os
import sys
import threading
from typing import List

from dbos_agent import DBOS, Debouncer, Queue, SetWorkflowTimeout

EFFECTS = os.environ["EFFECTS_FILE"]
BLOCK = os.environ.get("BLOCK") == "1"

queue = Queue("debounce_crash_queue")


@DBOS.workflow()
def debounce_target(x: int) -> int:
    with open(EFFECTS, "a") as f:
        f.write(f"{DBOS.workflow_id} {x}\n")
    return x


@DBOS.step()
def debounce_gate() -> None:
    if BLOCK:
        print(f"blocking {DBOS.workflow_id}", flush=True)
        threading.Event().wait()  # until SIGKILL


@DBOS.workflow()
def debounce_parent(key: str, period_sec: float) -> List[str]:
    debouncer = Debouncer.create(debounce_target, queue=queue)
    with SetWorkflowTimeout(30):
        first = debouncer.debounce(key, period_sec, 1)
    second = debouncer.debounce(key, period_sec, 2)
    debounce_gate()
    return [first.workflow_id, second.workflow_id]


if __name__ == "__main__":
    DBOS(config={"name": "debounce-crash-test"})
    DBOS.launch()
    print("ready", flush=True)
    for _ in sys.stdin:
        pass
    DBOS.destroy()
