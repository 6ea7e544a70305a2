/**
 * An order pipeline on dbos-agent, from Node: reserve inventory, charge the
 * card, ship, confirm. Each step is a DBOS step, so once it has run it is
 * never run again for the same order, whatever crashes in between. It is
 * DBOS TypeScript code with one change, the import (`dbos-agent` for
 * `@dbos-inc/dbos-sdk`); examples/python/order_pipeline.py is the same
 * pipeline in Python.
 *
 * The shop's own data (stock, charges, shipments) lives in the application's
 * database: Postgres tables in the schema SHOP_SCHEMA of SHOP_DATABASE_URL.
 * The workflows' checkpoints live in the agent's system database.
 *
 *     node build/order_pipeline.js demo            # places four orders on a queue and waits for them
 *     node build/order_pipeline.js worker          # a worker: runs the orders queue until stdin closes
 *     node build/order_pipeline.js report [ID...]  # what the shop database says happened
 *
 * The agent's socket comes from env DBOS_AGENT_SOCKET (else the agent's
 * default path), or DBOS_AGENT_LIBRARY and DBOS_AGENT_MODE select libdbos.so.
 * Env SLOW_SHIPPING=SECONDS makes the carrier call slow.
 */
import { randomUUID } from 'node:crypto';
import { DBOS } from 'dbos-agent'; // was: import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';

const SHOP_SCHEMA = process.env.SHOP_SCHEMA ?? 'shop';
const shop = new pg.Pool({
  connectionString: process.env.SHOP_DATABASE_URL ?? 'postgres://postgres:dbos@localhost:5432/dbos_agent_example',
  options: `-c search_path=${SHOP_SCHEMA}`,
  max: 4,
});

function log(msg: string): void {
  console.log(`[${process.pid}] ${msg}`);
}

async function initShop(): Promise<void> {
  await shop.query(`CREATE SCHEMA IF NOT EXISTS "${SHOP_SCHEMA}"`);
  await shop.query(`
    CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, available INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS reservations (order_id TEXT, sku TEXT, qty INTEGER);
    CREATE TABLE IF NOT EXISTS charges (charge_id TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER);
    CREATE TABLE IF NOT EXISTS gateway_calls (order_id TEXT, outcome TEXT);
    CREATE TABLE IF NOT EXISTS shipments (tracking TEXT PRIMARY KEY, order_id TEXT, address TEXT);
    CREATE TABLE IF NOT EXISTS emails (order_id TEXT, recipient TEXT, body TEXT);
    INSERT INTO stock VALUES ('widget', 100), ('gadget', 5), ('gizmo', 1) ON CONFLICT DO NOTHING;
  `);
}

/** Not enough stock: what the reservation step throws, recorded as the workflow's error. */
class OutOfStock extends Error {
  constructor(
    readonly sku: string,
    readonly wanted: number,
    readonly available: number,
  ) {
    super(`only ${available} ${sku} left, ${wanted} wanted`);
    this.name = 'OutOfStock';
  }
}

class GatewayTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GatewayTimeout';
  }
}

const PRICES: Record<string, number> = { widget: 1250, gadget: 4999, gizmo: 19900 };
// Orders above this need a manager's approval before anything happens.
const APPROVAL_THRESHOLD_CENTS = 15000;

interface Order {
  sku: string;
  qty: number;
  address: string;
  email: string;
}

interface Reservation {
  sku: string;
  qty: number;
  amount_cents: number;
}

interface Decision {
  approved: boolean;
  reason?: string;
}

type Outcome =
  | { order_id: string; rejected: string }
  | { order_id: string; charged_cents: number; charge_id: string; tracking: string };

export class Shop {
  @DBOS.step()
  static async reserveInventory(orderId: string, sku: string, qty: number): Promise<Reservation> {
    const conn = await shop.connect();
    try {
      await conn.query('BEGIN');
      const { rows } = await conn.query<{ available: number }>('SELECT available FROM stock WHERE sku = $1 FOR UPDATE', [sku]);
      const available = rows[0].available;
      if (available < qty) {
        await conn.query('ROLLBACK');
        throw new OutOfStock(sku, qty, available);
      }
      await conn.query('UPDATE stock SET available = available - $1 WHERE sku = $2', [qty, sku]);
      await conn.query('INSERT INTO reservations VALUES ($1, $2, $3)', [orderId, sku, qty]);
      await conn.query('COMMIT');
    } finally {
      conn.release();
    }
    log(`${orderId}: reserved ${qty} x ${sku}`);
    return { sku, qty, amount_cents: PRICES[sku] * qty };
  }

  @DBOS.step({ retriesAllowed: true, intervalSeconds: 0.2, maxAttempts: 4, backoffRate: 2 })
  static async chargePayment(orderId: string, amountCents: number): Promise<string> {
    const { rows } = await shop.query<{ calls: string }>('SELECT count(*) AS calls FROM gateway_calls WHERE order_id = $1', [orderId]);
    // The payment gateway times out on the first call of every order: the
    // step retries with backoff, and is recorded once when it succeeds.
    if (Number(rows[0].calls) === 0) {
      await shop.query("INSERT INTO gateway_calls VALUES ($1, 'timeout')", [orderId]);
      log(`${orderId}: payment gateway timed out; the step will retry`);
      throw new GatewayTimeout(`gateway timeout charging ${orderId}`);
    }
    const chargeId = `ch_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    await shop.query("INSERT INTO gateway_calls VALUES ($1, 'ok')", [orderId]);
    await shop.query('INSERT INTO charges VALUES ($1, $2, $3)', [chargeId, orderId, amountCents]);
    log(`${orderId}: charged ${(amountCents / 100).toFixed(2)} (${chargeId})`);
    return chargeId;
  }

  @DBOS.step()
  static async shipOrder(orderId: string, address: string): Promise<string> {
    const slow = Number(process.env.SLOW_SHIPPING ?? '0');
    log(`${orderId}: calling the carrier${slow ? ` (slow: ${slow}s)` : ''}`);
    if (slow) await new Promise((r) => setTimeout(r, slow * 1000)); // a slow carrier API
    const tracking = `TRK${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`;
    await shop.query('INSERT INTO shipments VALUES ($1, $2, $3)', [tracking, orderId, address]);
    log(`${orderId}: shipped, tracking ${tracking}`);
    return tracking;
  }

  @DBOS.step()
  static async sendConfirmation(orderId: string, email: string, tracking: string): Promise<void> {
    await shop.query('INSERT INTO emails VALUES ($1, $2, $3)', [orderId, email, `Your order is on its way: ${tracking}`]);
    log(`${orderId}: confirmation sent to ${email}`);
  }

  /** How far the order got: the latest stage as an event, every stage on a stream (both durable). */
  static async progress(stage: string): Promise<void> {
    await DBOS.setEvent('stage', stage);
    await DBOS.writeStream('progress', stage);
  }

  @DBOS.workflow()
  static async processOrder(order: Order): Promise<Outcome> {
    const orderId = DBOS.workflowID!;
    const amount = PRICES[order.sku] * order.qty;
    try {
      if (amount > APPROVAL_THRESHOLD_CENTS) {
        // Ask for approval and wait for the answer, durably: a worker
        // killed here resumes waiting with the same deadline.
        await DBOS.setEvent('approval_request', { amount_cents: amount });
        await Shop.progress('awaiting approval');
        const decision = await DBOS.recv<Decision>('approval', 60);
        if (!decision?.approved) {
          await Shop.progress('rejected');
          return { order_id: orderId, rejected: decision ? (decision.reason ?? 'rejected') : 'no answer within 60s' };
        }
      }
      const reservation = await Shop.reserveInventory(orderId, order.sku, order.qty);
      await Shop.progress('reserved');
      const chargeId = await Shop.chargePayment(orderId, reservation.amount_cents);
      await Shop.progress('charged');
      const tracking = await Shop.shipOrder(orderId, order.address);
      await Shop.progress('shipped');
      await Shop.sendConfirmation(orderId, order.email, tracking);
      await Shop.progress('confirmed');
      return { order_id: orderId, charged_cents: reservation.amount_cents, charge_id: chargeId, tracking };
    } finally {
      await DBOS.closeStream('progress');
    }
  }
}

async function launch(): Promise<void> {
  await initShop();
  DBOS.setConfig({ name: 'order-pipeline' });
  await DBOS.launch();
  await DBOS.registerQueue('orders', { workerConcurrency: 4 });
}

type Counts = Record<string, number>;

/** Per order, how many times each side effect happened. */
async function report(orderIds: string[]): Promise<Record<string, Counts>> {
  const out: Record<string, Counts> = {};
  for (const id of orderIds) {
    out[id] = {};
    for (const table of ['reservations', 'charges', 'shipments', 'emails']) {
      const { rows } = await shop.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE order_id = $1`, [id]);
      out[id][table] = Number(rows[0].n);
    }
  }
  return out;
}

async function readAll<T>(gen: AsyncGenerator<T, void, unknown>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of gen) out.push(v);
  return out;
}

async function demo(): Promise<number> {
  await launch();
  const run = randomUUID().slice(0, 6);
  const orders: Array<[string, Order]> = [
    [`order-${run}-1`, { sku: 'widget', qty: 3, address: '1 Main St', email: 'ana@example.com' }],
    [`order-${run}-2`, { sku: 'gadget', qty: 1, address: '2 High St', email: 'bo@example.com' }],
    // Over the threshold: the manager rejects the first and approves the
    // second, which then finds too few gadgets in stock.
    [`order-${run}-3`, { sku: 'gizmo', qty: 2, address: '3 Low Rd', email: 'cy@example.com' }],
    [`order-${run}-4`, { sku: 'gadget', qty: 9, address: '4 Far Way', email: 'di@example.com' }],
  ];
  const handles = [];
  for (const [id, order] of orders) {
    handles.push(await DBOS.startWorkflow(Shop, { workflowID: id, queueName: 'orders' }).processOrder(order));
    log(`${id}: enqueued (${order.qty} x ${order.sku})`);
  }
  const decisions: Array<[string, Decision]> = [
    [orders[2][0], { approved: false, reason: 'over budget' }],
    [orders[3][0], { approved: true }],
  ];
  for (const [id, decision] of decisions) {
    const request = await DBOS.getEvent<{ amount_cents: number }>(id, 'approval_request', 60);
    log(`${id}: approval requested for ${((request?.amount_cents ?? 0) / 100).toFixed(2)}; answering ${JSON.stringify(decision)}`);
    await DBOS.send(id, decision, 'approval');
  }
  const results: unknown[] = [];
  for (const h of handles) {
    try {
      const result = await h.getResult();
      results.push(result);
      log(`${h.workflowID}: ${(await h.getStatus())?.status} -> ${JSON.stringify(result)}`);
    } catch (err) {
      // The step's error, as the workflow recorded it.
      if (!(err instanceof Error) || err.name !== 'OutOfStock') throw err;
      results.push(err);
      log(`${h.workflowID}: ${(await h.getStatus())?.status} -> out of stock: ${err.message}`);
    }
  }
  for (const h of handles) {
    const steps = (await DBOS.listWorkflowSteps(h.workflowID)) ?? [];
    log(`${h.workflowID}: recorded steps ${steps.map((s) => `${s.functionID}:${s.name}`).join(', ')}`);
    const stages = await readAll(DBOS.readStream<string>(h.workflowID, 'progress'));
    const last = await DBOS.getEvent<string>(h.workflowID, 'stage', 0);
    log(`${h.workflowID}: progress stream ${JSON.stringify(stages)}, last stage ${JSON.stringify(last)}`);
  }
  const counts = await report(orders.map(([id]) => id));
  log(`side effects per order: ${JSON.stringify(counts)}`);
  // Orders 1 and 2 went through once each; order 3 was rejected and order 4
  // (nine of the four gadgets left) failed at reservation: neither touched
  // anything.
  const once = JSON.stringify({ reservations: 1, charges: 1, shipments: 1, emails: 1 });
  const none = JSON.stringify({ reservations: 0, charges: 0, shipments: 0, emails: 0 });
  let ok = JSON.stringify(counts[orders[0][0]]) === once && JSON.stringify(counts[orders[1][0]]) === once;
  ok &&= JSON.stringify(counts[orders[2][0]]) === none && JSON.stringify(counts[orders[3][0]]) === none;
  ok &&= JSON.stringify(await readAll(DBOS.readStream<string>(orders[0][0], 'progress'))) === JSON.stringify(['reserved', 'charged', 'shipped', 'confirmed']);
  ok &&= JSON.stringify(results[2]) === JSON.stringify({ order_id: orders[2][0], rejected: 'over budget' });
  ok &&= results[3] instanceof Error && results[3].name === 'OutOfStock';
  await DBOS.shutdown();
  await shop.end();
  console.log(ok ? 'DEMO OK' : 'DEMO FAILED');
  return ok ? 0 : 1;
}

async function worker(): Promise<number> {
  await launch();
  log('worker ready');
  // Runs until stdin closes (or the process is killed).
  for await (const _ of process.stdin) {
    void _;
  }
  await DBOS.shutdown();
  await shop.end();
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? 'demo';
  if (cmd === 'demo') return demo();
  if (cmd === 'worker') return worker();
  if (cmd === 'report') {
    console.log(JSON.stringify(await report(argv.slice(1))));
    await shop.end();
    return 0;
  }
  console.log('usage: order_pipeline.js demo | worker | report [ID...]');
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
