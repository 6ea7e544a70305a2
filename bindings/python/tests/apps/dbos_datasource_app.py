"""An application written for the official DBOS Python package that keeps
its orders in an application database through a SQLAlchemyDatasource. The
test runs it as it is with `dbos`, and again with only its import changed to
`dbos_agent`, and expects the same output. The system database comes from
APP_DATABASE_URL and APP_SCHEMA, the application database from DS_URL and
DS_SCHEMA; the agent's socket (used only by dbos_agent) from
DBOS_AGENT_SOCKET."""

import os
import sys

import sqlalchemy as sa

from dbos import DBOS, SetWorkflowID, SQLAlchemyDatasource

SCHEMA = os.environ["DS_SCHEMA"]
ORDERS = f'"{SCHEMA}".orders'
ds = SQLAlchemyDatasource.create(os.environ["DS_URL"], schema=SCHEMA)
with ds.engine.begin() as conn:
    conn.execute(sa.text(f"CREATE TABLE {ORDERS} (id SERIAL PRIMARY KEY, sku TEXT NOT NULL, qty INT NOT NULL)"))
calls = {"place": 0, "cancel": 0}


@ds.transaction()
def place_order(sku: str, qty: int) -> int:
    calls["place"] += 1
    q = sa.text(f"INSERT INTO {ORDERS} (sku, qty) VALUES (:sku, :qty) RETURNING id")
    return int(ds.sql_session().execute(q, {"sku": sku, "qty": qty}).scalar_one())


@ds.transaction(name="cancel_order", isolation_level="READ COMMITTED")
def cancel(order_id: int) -> int:
    calls["cancel"] += 1
    q = sa.text(f"DELETE FROM {ORDERS} WHERE id = :id")
    if ds.sql_session().execute(q, {"id": order_id}).rowcount == 0:
        raise ValueError(f"no order {order_id}")
    return order_id


@DBOS.step()
def notify(order_id: int) -> str:
    return f"order {order_id} placed"


@DBOS.workflow()
def order_workflow(sku: str, qty: int) -> dict:
    order_id = place_order(sku, qty)
    note = notify(order_id)
    try:
        cancel(order_id + 100)
        refused = ""
    except ValueError as e:
        refused = str(e)
    return {"order": order_id, "note": note, "refused": refused, "id": DBOS.workflow_id}


if __name__ == "__main__":
    DBOS(config={
        "name": "unchanged-ds-app",
        "system_database_url": os.environ["APP_DATABASE_URL"],
        "dbos_system_schema": os.environ["APP_SCHEMA"],
        "run_admin_server": False,
    })
    DBOS.launch()
    wid = sys.argv[1]
    with SetWorkflowID(wid):
        print("result", order_workflow("widget", 2))
    with SetWorkflowID(wid):
        print("again", order_workflow("widget", 2))
    steps = DBOS.list_workflow_steps(wid)
    print("steps", [(s["function_id"], s["function_name"], s["output"], repr(s["error"])) for s in steps])
    with ds.engine.connect() as conn:
        print("orders", list(conn.execute(sa.text(f"SELECT id, sku, qty FROM {ORDERS} ORDER BY id"))))
        left = conn.execute(sa.text(f'SELECT count(*) FROM "{SCHEMA}".datasource_outputs')).scalar()
        print("checkpoints left", left)
    print("outside", place_order("gadget", 1), cancel(2))
    print("calls", calls)
    DBOS.destroy()
