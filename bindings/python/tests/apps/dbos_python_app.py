"""A small application written for the official DBOS Python package. The
test runs it as it is with `dbos`, and again with only its import changed to
`dbos_agent`, and expects the same output. The system database settings
come from the environment; the agent's socket (used only by dbos_agent, which
ignores the database keys) from DBOS_AGENT_SOCKET."""

import os
import sys

from dbos import DBOS, SetWorkflowID

attempts = {"n": 0}


@DBOS.step()
def fetch_inventory(sku: str) -> int:
    return {"widget": 7, "gadget": 3}[sku]


@DBOS.step(retries_allowed=True, interval_seconds=0.01, max_attempts=3, backoff_rate=1.0)
def reserve(sku: str, qty: int) -> str:
    attempts["n"] += 1
    if attempts["n"] == 1:
        raise ConnectionError("inventory service busy")
    return f"{qty}x{sku}"


@DBOS.workflow()
def checkout(sku: str, qty: int) -> dict:
    available = fetch_inventory(sku)
    if available < qty:
        raise ValueError(f"only {available} {sku} left")
    reservation = reserve(sku, qty)
    return {"sku": sku, "reservation": reservation, "left": available - qty, "id": DBOS.workflow_id}


if __name__ == "__main__":
    DBOS(config={
        "name": "unchanged-app",
        "system_database_url": os.environ["APP_DATABASE_URL"],
        "dbos_system_schema": os.environ["APP_SCHEMA"],
        "run_admin_server": False,
    })
    DBOS.launch()
    queue = DBOS.register_queue("unchanged_queue")
    wid = sys.argv[1]

    with SetWorkflowID(wid):
        print("direct", checkout("widget", 2))
    handle = DBOS.start_workflow(checkout, "gadget", 1)
    result = handle.get_result()
    print("handle", result["reservation"], result["left"], handle.get_status().status)
    queued = queue.enqueue(checkout, "widget", 1)
    print("queued", queued.get_result()["left"], queued.get_status().queue_name)
    try:
        checkout("gadget", 9)
    except ValueError as e:
        print("error", type(e).__name__, e)
    print("steps", [(s["function_id"], s["function_name"], s["output"]) for s in DBOS.list_workflow_steps(wid)])
    print("again", DBOS.retrieve_workflow(wid).get_result()["reservation"])
    status = DBOS.get_workflow_status(wid)
    print("status", status.status, status.name, status.input)
    print("listed", [w.workflow_id for w in DBOS.list_workflows(workflow_ids=[wid])])
    print("attempts", attempts["n"])
    DBOS.destroy()
