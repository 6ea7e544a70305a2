"""An order pipeline on dbos-agent: reserve inventory, charge the card, ship,
confirm. Each step is a DBOS step, so once it has run it is never run again
for the same order, whatever crashes in between.

The shop's own data (stock, charges, shipments) lives in a SQLite file
(env SHOP_DB), the application database of this example; the workflows'
checkpoints live in the agent's Postgres system database.

    python order_pipeline.py demo                 # a worker that places three orders and waits for them
    python order_pipeline.py worker               # a worker process: runs the orders queue until stdin closes
    python order_pipeline.py place ID SKU QTY     # enqueue an order (DBOSClient) and wait for its outcome
    python order_pipeline.py report [ID...]       # what the shop database says happened

The agent's socket comes from env DBOS_AGENT_SOCKET (else the agent's
default path). Env SLOW_SHIPPING=SECONDS makes the carrier call slow, which
the crash demo uses to kill a worker in the middle of shipping.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import time
import uuid
from typing import Any, Dict, List

from dbos_agent import DBOS, DBOSClient, Queue, SetWorkflowID

SHOP_DB = os.environ.get("SHOP_DB", "shop.db")
logging.basicConfig(level=logging.WARNING, format=f"[{os.getpid()}] %(message)s")
orders_queue = Queue("orders", worker_concurrency=4)


def log(msg: str) -> None:
    print(f"[{os.getpid()}] {msg}", flush=True)


def db() -> sqlite3.Connection:
    conn = sqlite3.connect(SHOP_DB, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def init_shop() -> None:
    with db() as conn:
        conn.executescript(
            """
            CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, available INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS reservations (order_id TEXT, sku TEXT, qty INTEGER);
            CREATE TABLE IF NOT EXISTS charges (charge_id TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER);
            CREATE TABLE IF NOT EXISTS gateway_calls (order_id TEXT, outcome TEXT);
            CREATE TABLE IF NOT EXISTS shipments (tracking TEXT PRIMARY KEY, order_id TEXT, address TEXT);
            CREATE TABLE IF NOT EXISTS emails (order_id TEXT, recipient TEXT, body TEXT);
            INSERT OR IGNORE INTO stock VALUES ('widget', 100), ('gadget', 5), ('gizmo', 1);
            """
        )


class OutOfStock(Exception):
    def __init__(self, sku: str, wanted: int, available: int):
        super().__init__(f"only {available} {sku} left, {wanted} wanted")
        self.sku, self.wanted, self.available = sku, wanted, available

    def __reduce__(self) -> Any:
        return (OutOfStock, (self.sku, self.wanted, self.available))


class GatewayTimeout(Exception):
    pass


PRICES = {"widget": 1250, "gadget": 4999, "gizmo": 19900}


@DBOS.step()
def reserve_inventory(order_id: str, sku: str, qty: int) -> Dict[str, Any]:
    with db() as conn:
        conn.execute("BEGIN IMMEDIATE")
        (available,) = conn.execute("SELECT available FROM stock WHERE sku = ?", (sku,)).fetchone()
        if available < qty:
            conn.execute("ROLLBACK")
            raise OutOfStock(sku, qty, available)
        conn.execute("UPDATE stock SET available = available - ? WHERE sku = ?", (qty, sku))
        conn.execute("INSERT INTO reservations VALUES (?, ?, ?)", (order_id, sku, qty))
        conn.execute("COMMIT")
    log(f"{order_id}: reserved {qty} x {sku}")
    return {"sku": sku, "qty": qty, "amount_cents": PRICES[sku] * qty}


@DBOS.step(retries_allowed=True, interval_seconds=0.2, max_attempts=4, backoff_rate=2.0)
def charge_payment(order_id: str, amount_cents: int) -> str:
    with db() as conn:
        (calls,) = conn.execute("SELECT count(*) FROM gateway_calls WHERE order_id = ?", (order_id,)).fetchone()
        # The payment gateway times out on the first call of every order: the
        # step retries with backoff, and is recorded once when it succeeds.
        if calls == 0:
            conn.execute("INSERT INTO gateway_calls VALUES (?, 'timeout')", (order_id,))
            log(f"{order_id}: payment gateway timed out; the step will retry")
            raise GatewayTimeout(f"gateway timeout charging {order_id}")
        charge_id = "ch_" + uuid.uuid4().hex[:12]
        conn.execute("INSERT INTO gateway_calls VALUES (?, 'ok')", (order_id,))
        conn.execute("INSERT INTO charges VALUES (?, ?, ?)", (charge_id, order_id, amount_cents))
    log(f"{order_id}: charged {amount_cents / 100:.2f} ({charge_id})")
    return charge_id


@DBOS.step()
def ship_order(order_id: str, address: str) -> str:
    slow = float(os.environ.get("SLOW_SHIPPING", "0"))
    log(f"{order_id}: calling the carrier" + (f" (slow: {slow:g}s)" if slow else ""))
    if slow:
        time.sleep(slow)  # a slow carrier API: the crash demo kills the worker here
    tracking = "TRK" + uuid.uuid4().hex[:10].upper()
    with db() as conn:
        conn.execute("INSERT INTO shipments VALUES (?, ?, ?)", (tracking, order_id, address))
    log(f"{order_id}: shipped, tracking {tracking}")
    return tracking


@DBOS.step()
def send_confirmation(order_id: str, email: str, tracking: str) -> None:
    with db() as conn:
        conn.execute("INSERT INTO emails VALUES (?, ?, ?)", (order_id, email, f"Your order is on its way: {tracking}"))
    log(f"{order_id}: confirmation sent to {email}")


# Orders above this need a manager's approval before anything happens.
APPROVAL_THRESHOLD_CENTS = 15000


def progress(stage: str) -> None:
    """Publish how far the order got: the latest stage as an event, every
    stage on a stream (both durable: a replay does not publish twice)."""
    DBOS.set_event("stage", stage)
    DBOS.write_stream("progress", stage)


@DBOS.workflow()
def process_order(order: Dict[str, Any]) -> Dict[str, Any]:
    order_id = DBOS.workflow_id
    assert order_id is not None
    amount = PRICES[order["sku"]] * order["qty"]
    try:
        if amount > APPROVAL_THRESHOLD_CENTS:
            # Ask for approval and wait for the answer, durably: a worker
            # killed here resumes waiting with the same deadline.
            DBOS.set_event("approval_request", {"amount_cents": amount})
            progress("awaiting approval")
            decision = DBOS.recv("approval", timeout_seconds=60)
            if not decision or not decision.get("approved"):
                reason = decision.get("reason") if decision else "no answer within 60s"
                progress("rejected")
                return {"order_id": order_id, "rejected": reason}
        reservation = reserve_inventory(order_id, order["sku"], order["qty"])
        progress("reserved")
        charge_id = charge_payment(order_id, reservation["amount_cents"])
        progress("charged")
        tracking = ship_order(order_id, order["address"])
        progress("shipped")
        send_confirmation(order_id, order["email"], tracking)
        progress("confirmed")
        return {"order_id": order_id, "charged_cents": reservation["amount_cents"], "charge_id": charge_id, "tracking": tracking}
    finally:
        DBOS.close_stream("progress")


def launch() -> None:
    init_shop()
    DBOS(config={"name": "order-pipeline"})
    DBOS.launch()


def report(order_ids: List[str]) -> Dict[str, Dict[str, int]]:
    """Per order, how many times each side effect happened."""
    out: Dict[str, Dict[str, int]] = {}
    with db() as conn:
        for oid in order_ids:
            out[oid] = {
                table: conn.execute(f"SELECT count(*) FROM {table} WHERE order_id = ?", (oid,)).fetchone()[0]
                for table in ("reservations", "charges", "shipments", "emails")
            }
    return out


def demo() -> int:
    launch()
    run = uuid.uuid4().hex[:6]
    orders = [
        (f"order-{run}-1", {"sku": "widget", "qty": 3, "address": "1 Main St", "email": "ana@example.com"}),
        (f"order-{run}-2", {"sku": "gadget", "qty": 1, "address": "2 High St", "email": "bo@example.com"}),
        # Over the threshold: the manager rejects the first and approves the
        # second, which then finds too few gadgets in stock.
        (f"order-{run}-3", {"sku": "gizmo", "qty": 2, "address": "3 Low Rd", "email": "cy@example.com"}),
        (f"order-{run}-4", {"sku": "gadget", "qty": 9, "address": "4 Far Way", "email": "di@example.com"}),
    ]
    handles = []
    for oid, order in orders:
        with SetWorkflowID(oid):
            handles.append(orders_queue.enqueue(process_order, order))
        log(f"{oid}: enqueued ({order['qty']} x {order['sku']})")
    decisions = {orders[2][0]: {"approved": False, "reason": "over budget"}, orders[3][0]: {"approved": True}}
    for oid, decision in decisions.items():
        request = DBOS.get_event(oid, "approval_request", timeout_seconds=60)
        log(f"{oid}: approval requested for {request['amount_cents'] / 100:.2f}; answering {json.dumps(decision)}")
        DBOS.send(oid, decision, topic="approval")
    for h in handles:
        try:
            result = h.get_result()
            log(f"{h.workflow_id}: {h.get_status().status} -> {json.dumps(result)}")
        except OutOfStock as e:
            log(f"{h.workflow_id}: {h.get_status().status} -> out of stock: {e}")
    for h in handles:
        steps = DBOS.list_workflow_steps(h.workflow_id)
        log(f"{h.workflow_id}: recorded steps " + ", ".join(f"{s['function_id']}:{s['function_name']}" for s in steps))
        stages = list(DBOS.read_stream(h.workflow_id, "progress"))
        log(f"{h.workflow_id}: progress stream {stages}, last stage {DBOS.get_event(h.workflow_id, 'stage', timeout_seconds=0)!r}")
    counts = report([oid for oid, _ in orders])
    log("side effects per order: " + json.dumps(counts))
    # Orders 1 and 2 went through once each; order 3 was rejected and order
    # 4 (nine of the four gadgets left) failed at reservation: neither
    # touched anything.
    none = {"reservations": 0, "charges": 0, "shipments": 0, "emails": 0}
    ok = counts[orders[0][0]] == counts[orders[1][0]] == {"reservations": 1, "charges": 1, "shipments": 1, "emails": 1}
    ok = ok and counts[orders[2][0]] == none and counts[orders[3][0]] == none
    ok = ok and list(DBOS.read_stream(orders[0][0], "progress")) == ["reserved", "charged", "shipped", "confirmed"]
    ok = ok and handles[2].get_result() == {"order_id": orders[2][0], "rejected": "over budget"}
    DBOS.destroy()
    print("DEMO OK" if ok else "DEMO FAILED", flush=True)
    return 0 if ok else 1


def worker() -> int:
    launch()
    log("worker ready")
    for _ in sys.stdin:
        pass  # runs until stdin closes (or the process is killed)
    DBOS.destroy()
    return 0


def place(order_id: str, sku: str, qty: int) -> int:
    init_shop()
    client = DBOSClient(application_name="order-pipeline")
    handle = client.enqueue(
        {"workflow_name": "process_order", "queue_name": "orders", "workflow_id": order_id},
        {"sku": sku, "qty": qty, "address": "9 Crash Ave", "email": "dee@example.com"},
    )
    log(f"{order_id}: enqueued by a client")
    result = handle.get_result()
    log(f"{order_id}: {handle.get_status().status} -> {json.dumps(result)}")
    steps = client.list_workflow_steps(order_id)
    log(f"{order_id}: recorded steps " + ", ".join(f"{s['function_id']}:{s['function_name']}" for s in steps))
    client.destroy()
    return 0


def main(argv: List[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "demo"
    if cmd == "demo":
        return demo()
    if cmd == "worker":
        return worker()
    if cmd == "place":
        return place(argv[2], argv[3], int(argv[4]))
    if cmd == "report":
        print(json.dumps(report(argv[2:])), flush=True)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
