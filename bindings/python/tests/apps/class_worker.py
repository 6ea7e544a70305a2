"""A worker process for the crash test of configured instances: two
instances of one class, alpha (factor 10) and beta (factor 100), whose
workflow's steps each append "<workflow id> <instance> <step>" to
EFFECTS_FILE and print "ran <workflow id> <instance> <step>"; in step
BLOCK_AT a step prints "blocking <workflow id> <instance> <step>" and hangs
until SIGKILL. A line "start <workflow id> <instance> <steps>" on stdin
starts the workflow on that instance; it prints "ready" once launched and
exits when stdin closes. The agent's socket comes from env DBOS_AGENT_SOCKET."""

import logging
import os
import sys
import threading
from typing import List

from dbos_agent import DBOS, DBOSConfiguredInstance, Queue, SetWorkflowID

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")

EFFECTS = os.environ["EFFECTS_FILE"]
BLOCK_AT = int(os.environ.get("BLOCK_AT", "0"))

Queue("class_crash_queue")


def say(line: str) -> None:
    # One write per line: two workflows' threads print at once.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@DBOS.dbos_class()
class Line(DBOSConfiguredInstance):
    def __init__(self, name: str, factor: int) -> None:
        super().__init__(name)
        self.factor = factor

    @DBOS.step()
    def stage(self, n: int) -> int:
        wid = DBOS.workflow_id
        if n == BLOCK_AT:
            say(f"blocking {wid} {self.config_name} {n}")
            threading.Event().wait()  # until SIGKILL
        with open(EFFECTS, "a") as f:
            f.write(f"{wid} {self.config_name} {n}\n")
        say(f"ran {wid} {self.config_name} {n}")
        return n * self.factor

    @DBOS.workflow()
    def run(self, steps: int) -> List[int]:
        return [self.stage(i) for i in range(1, steps + 1)]


lines = {"alpha": Line("alpha", 10), "beta": Line("beta", 100)}

if __name__ == "__main__":
    DBOS(config={"name": "class-crash-test"})
    DBOS.launch()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd and cmd[0] == "start":
            with SetWorkflowID(cmd[1]):
                DBOS.start_workflow(lines[cmd[2]].run, int(cmd[3]))
    DBOS.destroy()
