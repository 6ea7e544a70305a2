/**
 * A DBOS TypeScript application written against the official
 * `@dbos-inc/dbos-sdk` and nothing else: test/dropin.test.ts runs it as it
 * is on DBOS TypeScript, then with only its import changed to `dbos-agent`
 * through the agent, and compares what the two print. It prints only what
 * its workflows compute and what DBOS reports about them (no times, no
 * generated IDs), one line per fact, in an order it fixes itself.
 *
 * Its database is DBOS_SYSTEM_DATABASE_URL; the agent's socket, for the
 * binding, DBOS_AGENT_SOCKET.
 */
import { ConfiguredInstance, DBOS, DBOSClient, Debouncer } from '@dbos-inc/dbos-sdk';

const RUN = process.env.DROPIN_RUN_ID ?? 'dropin';
const out = (what: string, value?: unknown): void => {
  console.log(value === undefined ? what : `${what}: ${show(value)}`);
};

/** A value printed so that its kind shows: a Date, a Map, a Set and a bigint are told apart from strings and objects. */
function show(v: unknown): string {
  if (v instanceof Date) return `Date(${v.toISOString()})`;
  if (v instanceof Map) return `Map{${[...v].map(([k, x]) => `${show(k)}=>${show(x)}`).join(', ')}}`;
  if (v instanceof Set) return `Set{${[...v].map(show).join(', ')}}`;
  if (typeof v === 'bigint') return `${v}n`;
  if (v instanceof Error) return `${v.constructor.name}(${v.message})`;
  if (Array.isArray(v)) return `[${v.map(show).join(', ')}]`;
  if (v && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${k}: ${show(x)}`).join(', ')}}`;
  return JSON.stringify(v) ?? 'undefined';
}

class OutOfStock extends Error {
  constructor(readonly sku: string) {
    super(`no stock for ${sku}`);
    this.name = 'OutOfStock';
  }
}

let flakyCalls = 0;
let reservations = 0;

class Orders {
  @DBOS.step()
  static async price(sku: string, qty: number): Promise<number> {
    return { apple: 3, pear: 5, plum: 7 }[sku as 'apple' | 'pear' | 'plum'] * qty;
  }

  @DBOS.step({ retriesAllowed: true, maxAttempts: 5, intervalSeconds: 0.01, backoffRate: 1 })
  static async flakyReserve(sku: string): Promise<string> {
    flakyCalls += 1;
    out(`  attempt ${DBOS.stepStatus?.currentAttempt} of step ${DBOS.stepID} in ${DBOS.workflowID === undefined ? 'no workflow' : 'a workflow'}`);
    if (flakyCalls < 3) throw new Error(`reservation service busy (${flakyCalls})`);
    reservations += 1;
    return `reserved:${sku}`;
  }

  @DBOS.step()
  static async checkStock(sku: string): Promise<void> {
    if (sku === 'durian') throw new OutOfStock(sku);
  }

  @DBOS.workflow()
  static async placeOrder(id: string, items: Array<[string, number]>): Promise<{ id: string; total: number; when: Date; lines: Map<string, number> }> {
    const lines = new Map<string, number>();
    let total = 0;
    for (const [sku, qty] of items) {
      await Orders.checkStock(sku);
      const p = await Orders.price(sku, qty);
      lines.set(sku, p);
      total += p;
    }
    await DBOS.setEvent('total', total);
    return { id, total, when: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)), lines };
  }

  @DBOS.workflow()
  static async reserveAll(skus: string[]): Promise<string[]> {
    const got: string[] = [];
    got.push(await Orders.flakyReserve(skus[0]));
    for (const s of skus.slice(1)) got.push(`later:${s}`);
    return got;
  }

  /** Waits for payment messages and confirms each back to its sender. */
  @DBOS.workflow()
  static async awaitPayment(orderID: string): Promise<string> {
    await DBOS.setEvent('state', 'waiting');
    const paid = await DBOS.recv<{ amount: number; from: string | null }>('payment', 30);
    if (!paid) return `${orderID}: timed out`;
    if (paid.from) await DBOS.send(paid.from, `thanks for ${paid.amount}`, 'receipt');
    await DBOS.setEvent('state', 'paid');
    return `${orderID}: paid ${paid.amount}`;
  }

  @DBOS.workflow()
  static async payer(target: string, amount: number): Promise<string | null> {
    await DBOS.send(target, { amount, from: DBOS.workflowID! }, 'payment');
    return DBOS.recv<string>('receipt', 30);
  }

  @DBOS.workflow()
  static async parent(n: number): Promise<number[]> {
    const a = await DBOS.startWorkflow(Orders, { workflowID: `${DBOS.workflowID}-child-a` }).square(n);
    const b = await Orders.square(n + 1);
    return [await a.getResult(), b];
  }

  /** Awaits a child that waits for a payment: cancelling the child ends this one too. */
  @DBOS.workflow()
  static async parentOfStuck(): Promise<string> {
    const child = await DBOS.startWorkflow(Orders, { workflowID: `${DBOS.workflowID}-child` }).awaitPayment('o-child');
    return child.getResult();
  }

  @DBOS.workflow()
  static async square(n: number): Promise<number> {
    return DBOS.runStep(async () => n * n, { name: 'multiply' });
  }

  @DBOS.workflow()
  static async ticker(count: number): Promise<number> {
    for (let i = 0; i < count; i++) await DBOS.writeStream('ticks', { i, big: BigInt(i) * 10n ** 20n });
    await DBOS.closeStream('ticks');
    await DBOS.sleep(5);
    return count;
  }

  @DBOS.workflow()
  static async fail(sku: string): Promise<void> {
    await Orders.checkStock(sku);
  }
}

/** An instance workflow: its name and config come from the instance. */
class Warehouse extends ConfiguredInstance {
  constructor(
    name: string,
    readonly city: string,
  ) {
    super(name);
  }

  @DBOS.workflow()
  async ship(order: string): Promise<string> {
    const label = await DBOS.runStep(async () => `${order}@${this.city}`, { name: 'label' });
    return `${this.name} ships ${label}`;
  }
}
const north = new Warehouse('north', 'Oslo');

/** Debounced: only the last arguments in the period run. */
const summarize = DBOS.registerWorkflow(async (what: string[]) => `summary of ${what.join('+')}`, { name: 'summarize' });

const tally = DBOS.registerStep(async (xs: number[]) => xs.reduce((s, x) => s + x, 0), { name: 'tally' });
const batch = DBOS.registerWorkflow(
  async (label: string, xs: number[]) => {
    const sum = await tally(xs);
    const tag = await DBOS.runStep(async () => new Set(xs.map((x) => x % 3)), { name: 'residues' });
    return { label, sum, tag, id: DBOS.workflowID };
  },
  { name: 'batch' },
);

async function steps(workflowID: string): Promise<void> {
  for (const s of (await DBOS.listWorkflowSteps(workflowID)) ?? []) {
    // A sleep's output is its wake time: when, not what.
    const output = s.name === 'DBOS.sleep' ? typeof s.output : s.output;
    out(`  step ${s.functionID} ${s.name}`, s.error ? s.error : output);
    if (s.childWorkflowID) out(`    child`, s.childWorkflowID);
  }
}

async function status(workflowID: string): Promise<void> {
  const st = await DBOS.getWorkflowStatus(workflowID);
  out(`status ${workflowID}`, st ? { name: st.workflowName, class: st.workflowClassName, status: st.status, queue: st.queueName ?? null } : null);
}

async function main(): Promise<void> {
  DBOS.setConfig({ name: 'dropin-app', systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, logLevel: 'warn' });
  await DBOS.launch();
  const queue = await DBOS.registerQueue('dropin_orders', { concurrency: 2 });

  // A workflow with its steps, its event and its rich result.
  const order = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-order` }).placeOrder('o-1', [
    ['apple', 2],
    ['pear', 1],
  ]);
  out('order', await order.getResult());
  out('order total event', await DBOS.getEvent(`${RUN}-order`, 'total', 5));
  await status(`${RUN}-order`);
  await steps(`${RUN}-order`);

  // Called directly, a workflow runs to its result; a step retried twice.
  out('reserve', await Orders.reserveAll(['apple', 'plum']));
  out('flaky calls', flakyCalls);

  // An error keeps its class name and message through the database.
  const failed = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-fail` }).fail('durian');
  out('failure', await failed.getResult().catch((e: unknown) => e));
  await status(`${RUN}-fail`);
  await steps(`${RUN}-fail`);

  // The same workflow ID again returns the first run's outcome; a different workflow under it conflicts.
  const again = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-order` }).placeOrder('o-ignored', []);
  out('same ID again', (await again.getResult()).id);
  const conflict = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-order` })
    .square(3)
    .then((h) => h.getResult())
    .catch((e: unknown) => e);
  out('conflict', conflict);

  // Messages both ways between two workflows, and the events of the waiting one.
  const waiting = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-pay` }).awaitPayment('o-1');
  out('state before', await DBOS.getEvent(`${RUN}-pay`, 'state', 10));
  out('payer', await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-payer` }).payer(`${RUN}-pay`, 13).then((h) => h.getResult()));
  out('payment', await waiting.getResult());
  out('state after', await DBOS.getEvent(`${RUN}-pay`, 'state', 10));
  await steps(`${RUN}-pay`);

  // A message from outside any workflow.
  const waitingOutside = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-pay2` }).awaitPayment('o-2');
  await DBOS.send(`${RUN}-pay2`, { amount: 21, from: null }, 'payment', `${RUN}-key`);
  await DBOS.send(`${RUN}-pay2`, { amount: 99, from: null }, 'payment', `${RUN}-key`);
  out('payment from outside', await waitingOutside.getResult());

  // Child workflows: one started, one called.
  out('parent', await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-parent` }).parent(4).then((h) => h.getResult()));
  await steps(`${RUN}-parent`);
  await status(`${RUN}-parent-child-a`);

  // A stream read while and after it is written, and a durable sleep.
  const ticker = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-ticker` }).ticker(3);
  const ticks: unknown[] = [];
  for await (const t of DBOS.readStream(`${RUN}-ticker`, 'ticks')) ticks.push(t);
  out('ticks', ticks);
  out('ticker', await ticker.getResult());
  await steps(`${RUN}-ticker`);

  // Functional registration, on a queue with a concurrency limit.
  const handles = [];
  for (let i = 0; i < 5; i++) {
    handles.push(await DBOS.startWorkflow(batch, { workflowID: `${RUN}-batch-${i}`, queueName: queue.name })(`b${i}`, [i, i + 1, i + 2]));
  }
  for (const h of handles) out('batch', await h.getResult());
  await status(`${RUN}-batch-0`);
  const queued = await DBOS.listWorkflows({ queueName: queue.name, sortDesc: false });
  out('queue ran', queued.map((w) => `${w.workflowID}:${w.status}`));

  // A queue of one at a time: the second waits its turn, and is listed as queued.
  const single = await DBOS.registerQueue('dropin_single', { concurrency: 1 });
  const first = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-q1`, queueName: single.name }).awaitPayment('q-1');
  const second = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-q2`, queueName: single.name }).awaitPayment('q-2');
  out('first in line', await DBOS.getEvent(`${RUN}-q1`, 'state', 10));
  const inLine = await DBOS.listQueuedWorkflows({ queueName: single.name, sortDesc: false });
  out('queued', inLine.map((w) => `${w.workflowID}:${w.status}`));
  await DBOS.send(`${RUN}-q1`, { amount: 1, from: null }, 'payment');
  await DBOS.send(`${RUN}-q2`, { amount: 2, from: null }, 'payment');
  out('queue of one', [await first.getResult(), await second.getResult()]);

  // A client, as another process would use it: enqueue by name, message, event, status.
  const client = await DBOSClient.create({ systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL! });
  const viaClient = await client.enqueue<typeof batch>({ workflowName: 'batch', queueName: queue.name, workflowID: `${RUN}-client-batch` }, 'from client', [7, 8]);
  out('client enqueue', await viaClient.getResult());
  const clientPay = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-client-pay` }).awaitPayment('c-1');
  out('client sees state', await client.getEvent(`${RUN}-client-pay`, 'state', 10));
  await client.send(`${RUN}-client-pay`, { amount: 8, from: null }, 'payment');
  out('client paid', await client.retrieveWorkflow<string>(`${RUN}-client-pay`).getResult());
  await clientPay.getResult();
  const seen = await client.getWorkflow(`${RUN}-client-batch`);
  out('client status', seen ? { name: seen.workflowName, status: seen.status, input: seen.input, output: seen.output } : null);
  await client.destroy();

  // Debouncing: two calls in the period, one run with the last arguments.
  const debouncer = new Debouncer({ workflow: summarize, startWorkflowParams: { workflowID: `${RUN}-debounced` } });
  const d1 = await debouncer.debounce('daily', 1500, ['a']);
  const d2 = await debouncer.debounce('daily', 1500, ['a', 'b']);
  out('debounced', [d1.workflowID === d2.workflowID, await d2.getResult()]);

  // An instance workflow.
  out('ship', await DBOS.startWorkflow(north, { workflowID: `${RUN}-ship` }).ship('o-1').then((h) => h.getResult()));
  await status(`${RUN}-ship`);

  // Management: cancel a waiting workflow, resume it, fork a finished one.
  const stuck = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-stuck` }).awaitPayment('o-3');
  out('stuck state', await DBOS.getEvent(`${RUN}-stuck`, 'state', 10));
  await DBOS.cancelWorkflow(`${RUN}-stuck`);
  out('cancelled', await stuck.getResult().catch((e: unknown) => e));
  await status(`${RUN}-stuck`);
  const resumed = await DBOS.resumeWorkflow<string>(`${RUN}-stuck`);
  await DBOS.send(`${RUN}-stuck`, { amount: 5, from: null }, 'payment');
  out('resumed', await resumed.getResult());
  // A child cancelled under its waiting parent.
  const parentOfStuck = await DBOS.startWorkflow(Orders, { workflowID: `${RUN}-pstuck` }).parentOfStuck();
  out('child state', await DBOS.getEvent(`${RUN}-pstuck-child`, 'state', 10));
  await DBOS.cancelWorkflow(`${RUN}-pstuck-child`);
  out('parent of cancelled', await parentOfStuck.getResult().catch((e: unknown) => e));
  out('parent of cancelled, retrieved', await DBOS.retrieveWorkflow(`${RUN}-pstuck`).getResult().catch((e: unknown) => e));
  await status(`${RUN}-pstuck`);
  await steps(`${RUN}-pstuck`);

  const forked = await DBOS.forkWorkflow<Awaited<ReturnType<typeof Orders.placeOrder>>>(`${RUN}-order`, 2, { newWorkflowID: `${RUN}-order-fork` });
  out('forked', await forked.getResult());
  await steps(`${RUN}-order-fork`);

  const mine = await DBOS.listWorkflows({ workflow_id_prefix: `${RUN}-`, sortDesc: false });
  out('workflows', mine.map((w) => `${w.workflowID} ${w.workflowName} ${w.status}`));
  out('reservations', reservations);
  await DBOS.shutdown();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
