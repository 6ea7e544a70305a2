"""A worker process for the identity-recovery test: its workflow requires
the role "admin" and reports, from each step, the identity it runs as
("identity <workflow id> <n> <json>"); it prints "blocking <id> <n>" before
hanging forever in step BLOCK_AT. It prints "ready" once launched and exits
when stdin closes. The agent's socket comes from env DBOS_AGENT_SOCKET."""

import json
import os
import sys
import threading
from typing import Any, List

from dbos_agent import DBOS, Queue

BLOCK_AT = int(os.environ.get("BLOCK_AT", "0"))

Queue("auth_crash_queue")


@DBOS.step()
def report(n: int) -> List[Any]:
    wid = DBOS.workflow_id
    if n == BLOCK_AT:
        print(f"blocking {wid} {n}", flush=True)
        threading.Event().wait()  # until SIGKILL
    ident = [DBOS.authenticated_user, DBOS.authenticated_roles, DBOS.assumed_role]
    print(f"identity {wid} {n} {json.dumps(ident)}", flush=True)
    return ident


@DBOS.required_roles(["admin"])
@DBOS.workflow()
def guarded(steps: int) -> List[List[Any]]:
    return [report(i) for i in range(1, steps + 1)]


if __name__ == "__main__":
    DBOS(config={"name": "auth-crash-test"})
    DBOS.launch()
    print("ready", flush=True)
    for _ in sys.stdin:
        pass
    DBOS.destroy()
