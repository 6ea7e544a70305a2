import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { DBOS, DBOSClient, WorkflowQueue, Error as DBOSErrors } from '../src';
import { requireEngine } from '../src/dbos';
import { Agent, freshAgent, whenSignalled } from './harness';

let agent: Agent;

// Workflows that hold until the test releases them, so what runs at once is observable.
const changed = new EventEmitter();
changed.setMaxListeners(100);
const running = new Map<string, Set<string>>();
const maxRunning = new Map<string, number>();
const gates = new Map<string, () => void>();
const order: string[] = [];

const gated = DBOS.registerWorkflow(
  async (queue: string, tag: string) => {
    const set = running.get(queue) ?? new Set<string>();
    running.set(queue, set);
    set.add(tag);
    maxRunning.set(queue, Math.max(maxRunning.get(queue) ?? 0, set.size));
    order.push(tag);
    const gate = new Promise<void>((resolve) => gates.set(tag, resolve));
    changed.emit('change');
    await gate;
    set.delete(tag);
    changed.emit('change');
    return tag;
  },
  { name: 'gated' },
);

const quick = DBOS.registerWorkflow(
  async (tag: string) => {
    order.push(tag);
    return tag;
  },
  { name: 'quick' },
);

const addOne = DBOS.registerWorkflow(async (x: number) => x + 1, { name: 'addOne' });

/** Resolves once probe holds, re-checked as each gated workflow starts and ends. */
async function until(probe: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  await whenSignalled(changed, 'change', probe, what, timeoutMs);
}

/** p, or a failure naming what did not happen within timeoutMs. */
function within<T>(p: Promise<T>, what: string, timeoutMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

function release(tag: string): void {
  const r = gates.get(tag);
  assert.ok(r, `workflow ${tag} is not waiting`);
  gates.delete(tag);
  r();
}

function runningOn(queue: string): string[] {
  return [...(running.get(queue) ?? [])];
}

async function queueLoad(name: string): Promise<{ pending: number; enqueued: number; delayed: number }> {
  const info = await requireEngine().request('get_queue', { name });
  return { pending: Number(info.pending), enqueued: Number(info.enqueued), delayed: Number(info.delayed) };
}

// Declared before launch: 4.x's constructor, announced in the hello.
new WorkflowQueue('conc', { concurrency: 2 });
new WorkflowQueue('worker', { workerConcurrency: 1 });
new WorkflowQueue('rate', { rateLimit: { limitPerPeriod: 2, periodSec: 1 } });
new WorkflowQueue('prio', { concurrency: 1, priorityEnabled: true });
new WorkflowQueue('dedup');
new WorkflowQueue('part', { partitionConcurrency: 1 });
new WorkflowQueue('delay');
new WorkflowQueue('unlistened', { concurrency: 3 });

const LISTENED = ['conc', 'worker', 'rate', 'prio', 'dedup', 'part', 'delay', 'late', 'registered', 'setters', 'stored'];

before(async () => {
  agent = await freshAgent('queues');
  DBOS.setConfig({ ...(agent.config('queues-app') as object), listenQueues: LISTENED } as never);
  await DBOS.launch();
});

after(async () => {
  for (const release of gates.values()) release();
  await DBOS.shutdown();
  await agent.cleanup();
});

/** Enqueues n gated workflows and releases them as they run, checking the queue never runs more than limit. */
async function drainWithin(queue: string, n: number, limit: number): Promise<void> {
  const handles = [];
  for (let i = 0; i < n; i++) handles.push(await DBOS.startWorkflow(gated, { queueName: queue })(queue, `${queue}-${i}`));
  let done = 0;
  while (done < n) {
    const expected = Math.min(limit, n - done);
    await until(() => runningOn(queue).length >= expected, `${expected} running on ${queue}`);
    // The agent's own count agrees: no more than the limit claimed, the rest waiting.
    const load = await queueLoad(queue);
    assert.equal(load.pending, expected, `${queue}: pending`);
    assert.equal(load.enqueued, n - done - expected, `${queue}: enqueued`);
    const released = runningOn(queue);
    for (const tag of released) {
      release(tag);
      done++;
    }
    // The released ones leave the running set before the next look (the
    // next ones may already be running by then: only the released are waited for).
    await until(() => released.every((tag) => !runningOn(queue).includes(tag)), `${queue} released`);
  }
  const results = await Promise.all(handles.map((h) => h.getResult()));
  assert.deepEqual(results.sort(), [...Array(n).keys()].map((i) => `${queue}-${i}`).sort());
  assert.equal(maxRunning.get(queue), limit);
}

test('a queue-wide concurrency limit: never more than 2 running at once', async () => {
  await drainWithin('conc', 6, 2);
});

test('a worker concurrency limit: never more than 1 running in this process', async () => {
  await drainWithin('worker', 4, 1);
});

test('a rate limit: at most 2 starts per second', async () => {
  const handles = [];
  for (let i = 0; i < 4; i++) handles.push(await DBOS.startWorkflow(quick, { queueName: 'rate' })(`rate-${i}`));
  await Promise.all(handles.map((h) => h.getResult()));
  const starts = (await Promise.all(handles.map((h) => h.getStatus()))).map((s) => s!.dequeuedAt!).sort((a, b) => a - b);
  // The third start waits until the first has left the one-second window; so does the fourth for the second.
  assert.ok(starts[2] - starts[0] >= 990, `third start ${starts[2] - starts[0]} ms after the first`);
  assert.ok(starts[3] - starts[1] >= 990, `fourth start ${starts[3] - starts[1]} ms after the second`);
});

test('priority: lower runs first, then creation order', async () => {
  const blocker = await DBOS.startWorkflow(gated, { queueName: 'prio' })('prio', 'prio-blocker');
  await until(() => runningOn('prio').includes('prio-blocker'), 'the blocker running');
  const enqueue = (tag: string, priority?: number) =>
    DBOS.startWorkflow(quick, { queueName: 'prio', enqueueOptions: priority === undefined ? {} : { priority } })(tag);
  const handles = [await enqueue('p5', 5), await enqueue('p1', 1), await enqueue('p3', 3), await enqueue('p-none'), await enqueue('p1b', 1)];
  const before = order.length;
  release('prio-blocker');
  await blocker.getResult();
  await Promise.all(handles.map((h) => h.getResult()));
  assert.deepEqual(order.slice(before), ['p-none', 'p1', 'p1b', 'p3', 'p5']);
  await assert.rejects(enqueue('bad', -1), DBOSErrors.DBOSInvalidQueuePriorityError);
});

test('deduplication: a held id is refused, or the holder returned', async () => {
  const first = await DBOS.startWorkflow(gated, { queueName: 'dedup', enqueueOptions: { deduplicationID: 'd1' } })('dedup', 'dedup-1');
  await assert.rejects(
    DBOS.startWorkflow(gated, { queueName: 'dedup', enqueueOptions: { deduplicationID: 'd1' } })('dedup', 'dedup-2'),
    (err: Error) => {
      assert.ok(err instanceof DBOSErrors.DBOSQueueDuplicatedError, `${err.name}: ${err.message}`);
      assert.equal((err as DBOSErrors.DBOSQueueDuplicatedError).deduplicationID, 'd1');
      assert.equal((err as DBOSErrors.DBOSQueueDuplicatedError).queue, 'dedup');
      return true;
    },
  );
  const existing = await DBOS.startWorkflow(gated, {
    queueName: 'dedup',
    enqueueOptions: { deduplicationID: 'd1' },
    duplicationPolicy: 'return-existing',
  })('dedup', 'dedup-3');
  assert.equal(existing.workflowID, first.workflowID);
  await until(() => runningOn('dedup').includes('dedup-1'), 'the holder running');
  release('dedup-1');
  assert.equal(await first.getResult(), 'dedup-1');
  // Once the holder ended, the id is free again.
  const again = await DBOS.startWorkflow(quick, { queueName: 'dedup', enqueueOptions: { deduplicationID: 'd1' } })('dedup-4');
  assert.equal(await again.getResult(), 'dedup-4');
});

test('partitions: one running per partition key, keys side by side', async () => {
  const start = (tag: string, key: string) =>
    DBOS.startWorkflow(gated, { queueName: 'part', enqueueOptions: { queuePartitionKey: key } })('part', tag);
  const a1 = await start('a1', 'a');
  const a2 = await start('a2', 'a');
  const b1 = await start('b1', 'b');
  await until(() => runningOn('part').length === 2, 'one of each key running');
  assert.deepEqual(runningOn('part').sort(), ['a1', 'b1']);
  assert.deepEqual(await queueLoad('part'), { pending: 2, enqueued: 1, delayed: 0 });
  release('a1');
  release('b1');
  await until(() => runningOn('part').includes('a2'), 'a2 running');
  release('a2');
  assert.deepEqual(await Promise.all([a1.getResult(), a2.getResult(), b1.getResult()]), ['a1', 'a2', 'b1']);
  assert.equal(maxRunning.get('part'), 2);
});

test('a delayed enqueue is DELAYED, then runs', async () => {
  const h = await DBOS.startWorkflow(quick, { queueName: 'delay', enqueueOptions: { delaySeconds: 1 } })('delayed');
  const status = await h.getStatus();
  assert.equal(status?.status, 'DELAYED');
  assert.ok(status?.delayUntilEpochMS !== undefined);
  assert.equal(await h.getResult(), 'delayed');
  const done = await h.getStatus();
  assert.equal(done?.status, 'SUCCESS');
  assert.ok(done!.dequeuedAt! >= status!.delayUntilEpochMS!, 'dequeued after its release time');
});

test('queues declared after launch are served', async () => {
  new WorkflowQueue('late', { concurrency: 1 });
  assert.equal(await (await DBOS.startWorkflow(addOne, { queueName: 'late' })(1)).getResult(), 2);
  assert.throws(() => new WorkflowQueue('late'), /Workflow Queue 'late' defined multiple times/);

  const q = await DBOS.registerQueue('registered', { workerConcurrency: 3, globalConcurrency: 4 });
  assert.equal(q.name, 'registered');
  assert.equal(q.workerConcurrency, 3);
  assert.equal(q.concurrency, 4);
  assert.equal(q.applicationName, 'queues-app');
  assert.equal(await (await DBOS.startWorkflow(addOne, { queueName: 'registered' })(10)).getResult(), 11);

  // By name, without the function.
  const byName = await DBOS.enqueueWorkflowWithOptions<number>({ queueName: 'registered', workflowName: 'addOne' }, 41);
  assert.equal(await byName.getResult(), 42);
  assert.equal((await byName.getStatus())?.queueName, 'registered');

  const names = (await DBOS.listQueues()).map((x) => x.name);
  for (const n of ['conc', 'late', 'registered', 'unlistened']) assert.ok(names.includes(n), `${n} listed`);
  assert.equal(await DBOS.retrieveQueue('no-such-queue'), null);
  const late = await DBOS.retrieveQueue('late');
  assert.equal(late?.concurrency, 1);
});

test('listenQueues: a queue outside it is stored but not served here', async () => {
  const stored = await DBOS.retrieveQueue('unlistened');
  assert.equal(stored?.concurrency, 3);
  const waiting = await DBOS.startWorkflow(addOne, { queueName: 'unlistened' })(1);
  // A workflow enqueued after it on a served queue runs; the unlistened one still waits.
  const later = await DBOS.startWorkflow(addOne, { queueName: 'conc' })(2);
  assert.equal(await later.getResult(), 3);
  assert.equal((await waiting.getStatus())?.status, 'ENQUEUED');
  assert.deepEqual(await queueLoad('unlistened'), { pending: 0, enqueued: 1, delayed: 0 });
});

test("a queue's setters write the stored row, its getters read it back", async () => {
  const q = await DBOS.registerQueue('setters', { globalConcurrency: 5 });
  await q.setWorkerConcurrency(2);
  await q.setRateLimit({ limitPerPeriod: 10, periodSec: 60 });
  await q.setPartitionConcurrency(4);
  await q.setPartitionWorkerConcurrency(2);
  await q.setPartitionRateLimit({ limitPerPeriod: 3, periodSec: 30 });
  await q.setMinPollingIntervalMs(500);

  const back = (await DBOS.retrieveQueue('setters'))!;
  assert.equal(await back.getGlobalConcurrency(), 5);
  assert.equal(await back.getConcurrency(), 5);
  assert.equal(await back.getWorkerConcurrency(), 2);
  assert.deepEqual(await back.getRateLimit(), { limitPerPeriod: 10, periodSec: 60 });
  assert.equal(await back.getPartitionConcurrency(), 4);
  assert.equal(await back.getPartitionWorkerConcurrency(), 2);
  assert.deepEqual(await back.getPartitionRateLimit(), { limitPerPeriod: 3, periodSec: 30 });
  assert.equal(await back.getMinPollingIntervalMs(), 500);

  // DBOS's cross-field checks, against the row as stored.
  await assert.rejects(back.setWorkerConcurrency(6), /workerConcurrency must be less than or equal to concurrency/);
  await assert.rejects(back.setGlobalConcurrency(1), /workerConcurrency must be less than or equal to concurrency/);
  await assert.rejects(back.setRateLimit({ limitPerPeriod: 1 } as never), /rateLimit must specify both limitPerPeriod and periodSec/);
  await assert.rejects(back.setPartitionConcurrency(0), /partitionConcurrency must be at least 1/);

  // Clearing a limit clears it in the row.
  await back.setPartitionRateLimit(undefined);
  await back.setRateLimit(undefined);
  assert.equal(await q.getRateLimit(), undefined);
  assert.equal(await q.getPartitionRateLimit(), undefined);
  assert.equal(await q.getWorkerConcurrency(), 2);

  // never_update leaves the row as stored; always_update overwrites it.
  const kept = await DBOS.registerQueue('setters', { globalConcurrency: 9, onConflict: 'never_update' });
  assert.equal(kept.concurrency, 5);
  const replaced = await DBOS.registerQueue('setters', { globalConcurrency: 9, onConflict: 'always_update' });
  assert.equal(replaced.concurrency, 9);
  assert.equal(replaced.workerConcurrency, undefined);
  // The default, update_if_latest_version: this worker runs the latest version.
  const latest = await DBOS.registerQueue('setters', { globalConcurrency: 7 });
  assert.equal(latest.concurrency, 7);
  assert.equal(await (await DBOS.startWorkflow(addOne, { queueName: 'setters' })(5)).getResult(), 6);
});

test("DBOS's validation of queue options, with its messages", async () => {
  await assert.rejects(DBOS.registerQueue('x', { priorityEnabled: true } as never), /priorityEnabled was removed: every queue dispatches in priority order/);
  await assert.rejects(DBOS.registerQueue('_dbos_mine'), /Queue name _dbos_mine is reserved/);
  await assert.rejects(DBOS.registerQueue('x', { concurrency: 1, globalConcurrency: 2 }), /set only one of them/);
  await assert.rejects(DBOS.registerQueue('x', { globalConcurrency: 1, workerConcurrency: 2 }), /concurrency must be greater than or equal to workerConcurrency/);
  await assert.rejects(
    DBOS.registerQueue('x', { partitionConcurrency: 1, partitionWorkerConcurrency: 2 }),
    /partitionConcurrency must be greater than or equal to partitionWorkerConcurrency/,
  );
  await assert.rejects(DBOS.registerQueue('x', { minPollingIntervalMs: 0 }), /minPollingIntervalMs must be positive/);
  assert.throws(() => new WorkflowQueue('y', { partitionQueue: true, partitionConcurrency: 1 }), /partitionQueue is deprecated/);
  assert.equal(await DBOS.retrieveQueue('x'), null);
});

test('deleteQueue removes the row', async () => {
  await DBOS.registerQueue('doomed', { globalConcurrency: 2 });
  assert.ok(await DBOS.retrieveQueue('doomed'));
  await DBOS.deleteQueue('doomed');
  assert.equal(await DBOS.retrieveQueue('doomed'), null);
});

test('enqueueWorkflowWithOptionsPortable carries named arguments in the portable format', async () => {
  const h = await DBOS.enqueueWorkflowWithOptionsPortable<number>({ queueName: 'conc', workflowName: 'addOne' }, [1], { extra: 2 });
  // The named arguments are stored for a workflow that takes them (a Python one); a TypeScript one gets the positional ones.
  assert.equal(await h.getResult(), 2);
  const row = await requireEngine().request('get_workflow', { workflow_id: h.workflowID, load_payloads: true });
  assert.equal(row.serialization, 'portable_json');
  assert.deepEqual(JSON.parse(row.inputs as string), { positionalArgs: [1], namedArgs: { extra: 2 } });
  // Named arguments need the portable format, as in DBOS.
  await assert.rejects(
    DBOS.enqueueWorkflowWithOptionsPortable({ queueName: 'conc', workflowName: 'addOne', serializationType: 'native' }, [1], { extra: 2 }),
    /does not currently support named args/,
  );
});

test('a queue stored by another process is served here when listenQueues names it, as in DBOS 5.x', async () => {
  const client = await DBOSClient.create({ ...(agent.config('queues-app') as object), systemDatabaseUrl: agent.databaseUrl, applicationName: 'queues-app' });
  try {
    // Registered after launch, and not by this process: the unlistened one first, so the reading that finds the other found it too.
    await client.registerQueue('stored-unlistened');
    await client.registerQueue('stored', { workerConcurrency: 1 });
    const waiting = await DBOS.enqueueWorkflowWithOptions<number>({ queueName: 'stored-unlistened', workflowName: 'addOne' }, 1);
    const served = await DBOS.enqueueWorkflowWithOptions<number>({ queueName: 'stored', workflowName: 'addOne' }, 7);
    assert.equal(await within(served.getResult(), 'the stored queue served'), 8);
    assert.equal((await waiting.getStatus())?.status, 'ENQUEUED');
    // Its stored limit applies here: one at a time.
    const held = [];
    for (let i = 0; i < 2; i++) held.push(await DBOS.startWorkflow(gated, { queueName: 'stored' })('stored', `stored-${i}`));
    await until(() => runningOn('stored').length === 1, 'one running on stored');
    assert.deepEqual(await queueLoad('stored'), { pending: 1, enqueued: 1, delayed: 0 });
    const [first] = runningOn('stored');
    const second = first === 'stored-0' ? 'stored-1' : 'stored-0';
    release(first);
    await until(() => runningOn('stored').includes(second), 'the second running on stored');
    release(second);
    await Promise.all(held.map((h) => h.getResult()));
    assert.equal(maxRunning.get('stored'), 1);
    await DBOS.cancelWorkflow(waiting.workflowID);
  } finally {
    await client.destroy();
  }
});
