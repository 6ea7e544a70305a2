"""A worker process for the crash tests of durable waits: workflows that
wait in recv, in get_event, in DBOS.sleep, and on a child. Each returns
what it got with the time it got it, so the test can tell a resumed wait
from one started over. Prints "ready" once launched; exits when stdin
closes. The agent's socket comes from env DBOS_AGENT_SOCKET."""

import logging
import sys
import time
from typing import Any, Dict, Optional

from dbos_agent import DBOS, Queue

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")

Queue("comm_crash_queue")


@DBOS.workflow()
def recv_waiter(topic: str, timeout: float) -> Dict[str, Any]:
    value = DBOS.recv(topic, timeout)
    return {"value": value, "at": time.time()}


@DBOS.workflow()
def event_waiter(target: str, key: str, timeout: float) -> Dict[str, Any]:
    value = DBOS.get_event(target, key, timeout)
    return {"value": value, "at": time.time()}


@DBOS.workflow()
def sleeper(seconds: float) -> Dict[str, Any]:
    DBOS.sleep(seconds)
    return {"value": None, "at": time.time()}


@DBOS.workflow()
def event_setter(key: str, value: Any) -> None:
    DBOS.set_event(key, value)


@DBOS.workflow()
def go_child() -> Optional[str]:
    return DBOS.recv("go", 60)


@DBOS.workflow()
def waiting_parent() -> Dict[str, Any]:
    value = DBOS.start_workflow(go_child).get_result()
    return {"value": value, "at": time.time()}


if __name__ == "__main__":
    DBOS(config={"name": "comm-crash"})
    DBOS.launch()
    print("ready", flush=True)
    for _ in sys.stdin:
        pass
    DBOS.destroy()
