"""The reference for the admin endpoints' shapes: an application on DBOS Python
2.31.1, the last release that ships DBOS's admin server, with the server on.

It runs a few workflows whose rows both admin servers then answer for (the
agent's, and this process's own), prints READY, and serves until its stdin
closes. Usage: dbos_admin_reference.py DATABASE_URL ADMIN_PORT
"""

import sys

from dbos import DBOS, Queue, SetWorkflowID

url, port = sys.argv[1], int(sys.argv[2])
DBOS(
    config={
        "name": "adminref",
        "system_database_url": url,
        "run_admin_server": True,
        "admin_port": port,
        "application_version": "ref-v1",
    }
)
queue = Queue("refq", concurrency=3, worker_concurrency=2)


class Boom(Exception):
    pass


@DBOS.step()
def add(a: int, b: int) -> int:
    return a + b


@DBOS.step()
def describe(x: int) -> dict:
    return {"sum": x, "tags": ("a", "b"), "ok": True, "none": None, "f": 1.5}


@DBOS.step()
def flaky_step() -> None:
    raise Boom("step broke")


@DBOS.workflow()
def child(label: str) -> str:
    return "child of " + label


@DBOS.workflow()
def parent(a: int, b: int, label: str = "x") -> list:
    s = add(a, b)
    d = describe(s)
    DBOS.set_event("ev", {"k": [1, 2]})
    with SetWorkflowID("ref-child"):
        c = DBOS.start_workflow(child, label).get_result()
    try:
        flaky_step()
    except Boom:
        pass
    return [d, c]


@DBOS.workflow()
def fails(msg: str) -> None:
    raise Boom(msg)


@DBOS.workflow()
def plain(s: str) -> str:
    return s


@DBOS.workflow()
def waiter() -> object:
    return DBOS.recv("go", timeout_seconds=600)


DBOS.launch()
with SetWorkflowID("ref-parent"):
    parent(1, 2, label="lbl")
with SetWorkflowID("ref-fails"):
    try:
        fails("it broke")
    except Boom:
        pass
with SetWorkflowID("ref-plain"):
    plain("just text")
with SetWorkflowID("ref-queued"):
    queue.enqueue(plain, "queued").get_result()
with SetWorkflowID("ref-waiting"):
    queue.enqueue(waiter)
print("READY", flush=True)
sys.stdin.read()
