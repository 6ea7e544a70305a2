"""A worker process for the data-source crash tests. Its workflow
``ds_credit(n)`` (``ds_credit_async`` with FLAVOUR=async) runs a transaction
``credit`` on the application database APP_DB_URL (schema APP_SCHEMA on
Postgres) that inserts the row (workflow id, n) into the table ``ledger`` and
returns n * 10, then a step ``after_credit``, and returns both outputs.

It prints "ready" once launched and "tx <id> <n>" each time the transaction's
body runs. Handshakes, chosen by env HOLD:
- ``in_tx``: after its insert, before its commit, the transaction prints
  "in-tx <id>" and blocks until the process is killed;
- ``before_record``: the transaction commits, then the step's record in the
  system database prints "before-record <id>" and blocks until killed (the
  window the application-database checkpoint covers);
- ``in_tx_until_go``: the process's first transaction prints "in-tx <id>"
  after its insert and waits for a "go" line before it goes on to commit.
With GATE=1 the step after the transaction prints "gate <id>" and waits for a
"go" line on stdin. It exits when stdin closes."""

import asyncio
import logging
import os
import sys
import threading
from typing import Any, Tuple

import sqlalchemy as sa

from dbos_agent import DBOS, AsyncSQLAlchemyDatasource, Queue, SQLAlchemyDatasource
from dbos_agent import _datasource

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")

URL = os.environ["APP_DB_URL"]
SCHEMA = os.environ.get("APP_SCHEMA") or None
HOLD = os.environ.get("HOLD", "")
GATE = os.environ.get("GATE") == "1"
FLAVOUR = os.environ.get("FLAVOUR", "sync")
LEDGER = f'"{SCHEMA}".ledger' if SCHEMA else "ledger"
go = threading.Event()
forever = threading.Event()
held = {"once": False}


def hold_once() -> bool:
    """Whether this transaction is the one HOLD=in_tx_until_go holds."""
    if HOLD != "in_tx_until_go" or held["once"]:
        return False
    held["once"] = True
    print(f"in-tx {DBOS.workflow_id}", flush=True)
    return True

Queue("ds_queue")

if HOLD == "before_record":
    real_record_call = _datasource.record_call  # type: ignore[attr-defined]

    def holding_record_call(run: Any, body: Any) -> Any:
        print(f"before-record {run.workflow_id}", flush=True)
        forever.wait()  # until SIGKILL
        return real_record_call(run, body)

    _datasource.record_call = holding_record_call  # type: ignore[attr-defined]


def insert_effect(n: int) -> str:
    wid = DBOS.workflow_id
    print(f"tx {wid} {n}", flush=True)
    return f"INSERT INTO {LEDGER} (workflow_id, n) VALUES ('{wid}', {n})"


if FLAVOUR == "sync":
    ds = SQLAlchemyDatasource.create(URL, schema=SCHEMA)

    @ds.transaction()
    def credit(n: int) -> int:
        ds.sql_session().execute(sa.text(insert_effect(n)))
        if HOLD == "in_tx":
            ds.sql_session().flush()
            print(f"in-tx {DBOS.workflow_id}", flush=True)
            forever.wait()  # until SIGKILL, with the transaction open
        if hold_once():
            go.wait()
        return n * 10

    @DBOS.step()
    def after_credit() -> str:
        if GATE:
            print(f"gate {DBOS.workflow_id}", flush=True)
            go.wait()
        return "after"

    @DBOS.workflow()
    def ds_credit(n: int) -> Tuple[int, str]:
        return credit(n), after_credit()

else:
    ads = asyncio.run(AsyncSQLAlchemyDatasource.create(URL, schema=SCHEMA))

    @ads.transaction()
    async def credit_async(n: int) -> int:
        await ads.sql_session().execute(sa.text(insert_effect(n)))
        if HOLD == "in_tx":
            await ads.sql_session().flush()
            print(f"in-tx {DBOS.workflow_id}", flush=True)
            await asyncio.to_thread(forever.wait)  # until SIGKILL, with the transaction open
        if hold_once():
            await asyncio.to_thread(go.wait)
        return n * 10

    @DBOS.step()
    async def after_credit_async() -> str:
        if GATE:
            print(f"gate {DBOS.workflow_id}", flush=True)
            await asyncio.to_thread(go.wait)
        return "after"

    @DBOS.workflow()
    async def ds_credit_async(n: int) -> Tuple[int, str]:
        return await credit_async(n), await after_credit_async()


if __name__ == "__main__":
    # A version of each flavour's own: the test enqueues onto it.
    DBOS(config={"name": "ds-crash-test", "application_version": f"ds-{FLAVOUR}"})
    DBOS.launch()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "go":
            go.set()
    DBOS.destroy()
