"""The official DBOS Python package (`dbos`, from PyPI) opened on the SQLite
file the agent served during the example: it lists the example's orders with
their outcomes, decoded, and the steps of one, as it would for a workflow it
ran itself. Exits non-zero unless it finds the four orders as the demo left
them.

    python official_list.py SYSTEM_DATABASE_URL
"""

import sys

from dbos import DBOSClient


def describe_error(error: object) -> object:
    """The exception as a person reads it. The demo's OutOfStock was pickled
    from the demo's __main__, which this process cannot import: dbos then
    hands the error over as its text (and warns that it did)."""
    if error is None or isinstance(error, str):
        return error
    return f"{type(error).__name__}: {error}"


def main(url: str) -> int:
    client = DBOSClient(system_database_url=url)
    try:
        orders = [w for w in client.list_workflows(sort_desc=False, load_input=False) if w.workflow_id.startswith("order-")]
        for w in orders:
            outcome = w.output if w.status == "SUCCESS" else describe_error(w.error)
            print(f"  {w.workflow_id:18} {w.status:8} {w.name:14} {outcome!r}")
        succeeded = [w for w in orders if w.status == "SUCCESS"]
        ok = len(orders) == 4 and len(succeeded) == 3 and all(w.output["order_id"] == w.workflow_id for w in succeeded)
        if orders:
            steps = client.list_workflow_steps(orders[0].workflow_id)
            print(f"  steps of {orders[0].workflow_id}: " + ", ".join(f"{s['function_id']}:{s['function_name']}" for s in steps))
            ok = ok and any(s["function_name"].endswith("charge_payment") for s in steps)
    finally:
        client.destroy()
    print("OFFICIAL DBOS READS THE FILE: OK" if ok else "OFFICIAL DBOS READS THE FILE: FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
