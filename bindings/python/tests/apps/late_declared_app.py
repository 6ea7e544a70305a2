"""A DBOS Python 3.4 application written for the official package, for issue
11's check. It declares its workflows inside a function after DBOS.launch(),
posts to a ledger with a SQLAlchemyDatasource transaction on a Postgres
application database, keeps its workflows on a DBOSConfiguredInstance, guards
one with required_roles and calls it under DBOSContextSetAuth, and awaits an
async step with timeout_seconds. The test runs it with `dbos` and, with only
its import changed, with `dbos_agent`, and expects the same output.

    late_declared_app.py run ORDER      the whole flow, printing what it saw
    late_declared_app.py crash ORDER    deposits, then parks in a step after the
                                        transaction committed (the test kills it)
    late_declared_app.py recover ORDER  declares again and awaits the deposit the
                                        killed process left, printing the ledger

The system database settings come from the environment (used by dbos only);
the agent's socket from DBOS_AGENT_SOCKET (used by dbos_agent only).
"""

import asyncio
import os
import sys
import time
from typing import Any, Dict

import sqlalchemy as sa

from dbos import DBOS, DBOSConfiguredInstance, DBOSContextSetAuth, SetWorkflowID, SQLAlchemyDatasource

MODE, ORDER = sys.argv[1], sys.argv[2]
LEDGER = os.environ["APP_LEDGER_TABLE"]

# Datasources are created before launch, as DBOS requires.
ledger_db = SQLAlchemyDatasource.create(os.environ["APP_LEDGER_DATABASE_URL"])
with ledger_db.engine.begin() as conn:
    conn.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {LEDGER} (account TEXT, order_id TEXT, cents INT)"))

DBOS(config={
    "name": "late-declared-app",
    "system_database_url": os.environ["APP_DATABASE_URL"],
    "dbos_system_schema": os.environ["APP_SCHEMA"],
    "run_admin_server": False,
})
DBOS.launch()


def declare() -> Any:
    """Everything durable is declared here, after launch, as code imported late
    or built in a function would."""

    @ledger_db.transaction()
    def post(account: str, order_id: str, cents: int) -> int:
        session = ledger_db.sql_session()
        session.execute(
            sa.text(f"INSERT INTO {LEDGER} (account, order_id, cents) VALUES (:a, :o, :c)"),
            {"a": account, "o": order_id, "c": cents},
        )
        return int(session.execute(sa.text(f"SELECT sum(cents) FROM {LEDGER} WHERE account = :a"), {"a": account}).scalar())

    @DBOS.step()
    def settle(balance: int) -> str:
        if MODE == "crash":
            print("parked", DBOS.workflow_id, flush=True)
            while True:  # the test SIGKILLs this process here
                time.sleep(1)
        return f"settled at {balance}"

    @DBOS.step(timeout_seconds=10)
    async def fx_rate(currency: str) -> float:
        await asyncio.sleep(0.01)
        return {"EUR": 0.5, "USD": 1.0}[currency]

    @DBOS.dbos_class()
    class Account(DBOSConfiguredInstance):
        def __init__(self, holder: str) -> None:
            self.holder = holder
            super().__init__(f"account-{holder}")

        @DBOS.workflow()
        @DBOS.required_roles(["teller"])
        def deposit(self, cents: int) -> Dict[str, Any]:
            balance = post(self.holder, DBOS.workflow_id or "", cents)
            return {"holder": self.holder, "balance": balance, "note": settle(balance), "user": DBOS.authenticated_user}

        @DBOS.workflow()
        async def quote(self, cents: int, currency: str) -> str:
            rate = await fx_rate(currency)
            return f"{self.holder}: {cents} cents = {cents * rate:.1f} {currency}"

    return Account("alice")


def ledger_rows() -> list:
    with ledger_db.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(f"SELECT order_id, cents FROM {LEDGER} ORDER BY order_id, cents"))]


def describe(wid: str) -> None:
    st = DBOS.get_workflow_status(wid)
    assert st is not None
    print("row", st.status, st.name, st.class_name, st.config_name, st.authenticated_user, st.assumed_role, st.authenticated_roles)
    print("steps", [s["function_name"] for s in DBOS.list_workflow_steps(wid)])


account = declare()
deposit_id = f"{ORDER}-deposit"

if MODE == "recover":
    print("recovered", DBOS.retrieve_workflow(deposit_id).get_result())
    describe(deposit_id)
    print("ledger", ledger_rows())
    sys.exit(0)

with DBOSContextSetAuth("alice", ["teller", "auditor"]):
    with SetWorkflowID(deposit_id):
        print("deposit", account.deposit(150))
if MODE == "crash":
    sys.exit(3)  # not reached: settle parks
describe(deposit_id)
with DBOSContextSetAuth("alice", ["teller"]):
    with SetWorkflowID(deposit_id):
        print("again", account.deposit(150)["balance"])  # same ID: the recorded outcome, no second post
try:
    with DBOSContextSetAuth("mallory", ["guest"]):
        account.deposit(1)
except Exception as e:
    print("refused", type(e).__name__)
print("quote", asyncio.run(account.quote(300, "EUR")))
print("ledger", ledger_rows())
