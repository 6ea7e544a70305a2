/**
 * DBOSClient against a real agent: a client-role connection enqueues onto a
 * queue the worker of this process serves (added to the worker's hello with
 * addHelloContributor), sends to a workflow, reads its events and stream,
 * and manages workflows through the same functions as DBOS.*.
 *
 * The workflow side of messages, events and streams is written here with
 * raw requests of the protocol (section 2.14), so that this file depends on
 * nothing but the core.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { DBOS, DBOSClient, Error as DBOSErrors } from '../src';
import { addHelloContributor, requireEngine } from '../src/dbos';
import { deserializeValue, serializeValue } from '../src/serialization';
import { Agent, eventually, freshAgent, whenSignalled } from './harness';

let agent: Agent;
let client: DBOSClient;
const APP = 'client-app';
const QUEUE = 'client-queue';
const UNSERVED = 'client-unserved';

addHelloContributor({
  hello(body) {
    body.queues = [{ name: QUEUE }];
  },
});

/** A durable operation of the calling workflow, as a raw request (ids N, and N+1 when `timed`). */
async function durableRequest(op: string, body: Record<string, unknown>, timed = false): Promise<Record<string, unknown>> {
  const e = requireEngine();
  const run = e.currentRun()!;
  const functionId = run.takeFunctionId();
  const extra: Record<string, unknown> = {};
  if (timed) {
    extra.timeout_function_id = run.takeFunctionId();
    const nothing = await serializeValue(null, e.serializer);
    extra.timeout_output = nothing.value;
    extra.timeout_serialization = nothing.serialization;
  }
  return run.conn.request(op, {
    ...body,
    ...extra,
    caller: { workflow_id: run.workflowID, owner_xid: run.ownerXid, function_id: functionId },
  });
}

const addStep = DBOS.registerStep(async (a: number, b: number) => a + b, { name: 'addStep' });
DBOS.registerWorkflow(async (a: number, b: number) => addStep(a, b), { name: 'clientTarget' });

const firstStep = DBOS.registerStep(async () => 'started', { name: 'firstStep' });
const receiver = DBOS.registerWorkflow(
  async (topic: string) => {
    await firstStep(); // the protocol numbers a caller's operations from 1
    const reply = await durableRequest('recv', { topic, timeout_ms: 30_000 }, true);
    return deserializeValue(reply.message as string, (reply.serialization as string) ?? null, requireEngine().serializer);
  },
  { name: 'clientReceiver' },
);

const publisher = DBOS.registerWorkflow(
  async (value: string) => {
    await firstStep();
    const ser = await serializeValue(value, requireEngine().serializer);
    await durableRequest('set_event', { key: 'status', value: ser.value, serialization: ser.serialization });
    return value;
  },
  { name: 'clientPublisher' },
);

const writer = DBOS.registerWorkflow(
  async (values: number[]) => {
    await firstStep();
    const e = requireEngine();
    for (const v of values) {
      const ser = await serializeValue(v, e.serializer);
      await durableRequest('write_stream', { key: 'numbers', value: ser.value, serialization: ser.serialization });
    }
    const nothing = await serializeValue(null, e.serializer);
    await durableRequest('write_stream', { key: 'numbers', value: nothing.value, serialization: nothing.serialization, close: true });
    return values.length;
  },
  { name: 'clientWriter' },
);

// A workflow that holds until released, so what a queue runs at once is observable.
const held = new Map<string, () => void>();
const heldChanged = new EventEmitter();
let heldMax = 0;
DBOS.registerWorkflow(
  async (tag: string) => {
    const gate = new Promise<void>((resolve) => held.set(tag, resolve));
    heldMax = Math.max(heldMax, held.size);
    heldChanged.emit('change');
    await gate;
    return tag;
  },
  { name: 'clientHeld' },
);

/** Resolves once probe holds, checked as each held workflow starts. */
function whenHeld(probe: () => boolean, what: string): Promise<boolean> {
  return whenSignalled(heldChanged, 'change', probe, what);
}

function releaseHeld(tag: string): void {
  const r = held.get(tag);
  assert.ok(r, `${tag} is not held`);
  held.delete(tag);
  r();
}

// Called with a schedule's ticks; the schedules are made by the client, never by this process.
const clientTicks: Array<{ workflowID: string; scheduled: unknown; context: unknown }> = [];
const ticked = new EventEmitter();
DBOS.registerWorkflow(
  async (scheduled: Date, context: unknown) => {
    clientTicks.push({ workflowID: DBOS.workflowID!, scheduled, context });
    ticked.emit('tick');
  },
  { name: 'clientTick' },
);

/** The first tick whose workflow id starts with prefix (waited for). */
function tickOf(prefix: string): Promise<{ workflowID: string; scheduled: unknown; context: unknown }> {
  return whenSignalled(ticked, 'tick', () => clientTicks.find((t) => t.workflowID.startsWith(prefix)), `a tick of ${prefix}`);
}

before(async () => {
  agent = await freshAgent('client');
  const config = agent.config(APP);
  DBOS.setConfig(config as never);
  await DBOS.launch();
  client = await DBOSClient.create({ ...config, systemDatabaseUrl: agent.databaseUrl, applicationName: APP });
});

after(async () => {
  for (const r of held.values()) r();
  await client?.destroy();
  await DBOS.shutdown();
  await agent.cleanup();
});

test('enqueue by name onto a queue this process serves; the handle gives the result', async () => {
  const h = await client.enqueue<(a: number, b: number) => Promise<number>>(
    { queueName: QUEUE, workflowName: 'clientTarget', workflowID: 'enq-1' },
    2,
    3,
  );
  assert.equal(h.workflowID, 'enq-1');
  assert.equal(await h.getResult(), 5);
  assert.equal(await client.retrieveWorkflow<number>('enq-1').getResult(), 5);
  const status = await h.getStatus();
  assert.equal(status?.status, 'SUCCESS');
  assert.equal(status?.queueName, QUEUE);
  assert.equal(status?.applicationName, APP);
  assert.deepEqual(status?.input, [2, 3]);
  assert.equal((await client.getWorkflow('enq-1'))?.output, 5);
  assert.equal(await client.getWorkflow('no-such-workflow'), undefined);

  // The same id again is the same workflow (DBOS's default reuse policy).
  const again = await client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', workflowID: 'enq-1' }, 7, 7);
  assert.equal(await again.getResult(), 5);
});

test('enqueue options: a generated id, a delay, deduplication, and argument checks', async () => {
  const generated = await client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget' }, 1, 1);
  assert.match(generated.workflowID, /^[0-9a-f-]{36}$/);
  assert.equal(await generated.getResult(), 2);

  const delayed = await client.enqueue(
    { queueName: UNSERVED, workflowName: 'clientTarget', workflowID: 'enq-delayed', delaySeconds: 3600, priority: 4, deduplicationID: 'dd-1' },
    1,
    2,
  );
  const status = await delayed.getStatus();
  assert.equal(status?.status, 'DELAYED');
  assert.equal(status?.priority, 4);
  assert.equal(status?.deduplicationID, 'dd-1');
  await assert.rejects(
    client.enqueue({ queueName: UNSERVED, workflowName: 'clientTarget', deduplicationID: 'dd-1' }, 1, 2),
    (err: Error) => err instanceof DBOSErrors.DBOSError,
  );
  const existing = await client.enqueue(
    { queueName: UNSERVED, workflowName: 'clientTarget', deduplicationID: 'dd-1', duplicationPolicy: 'return-existing' },
    1,
    2,
  );
  assert.equal(existing.workflowID, 'enq-delayed');
  await client.cancelWorkflow('enq-delayed');

  await assert.rejects(client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', priority: -1 }), DBOSErrors.DBOSInvalidQueuePriorityError);
  await assert.rejects(
    client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', attributes: [1] as never }),
    /Invalid workflow attributes: must be a key-value object, got array/,
  );
  await assert.rejects(
    client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', attributes: { f: () => 1 } }),
    /no JSON-serializable properties/,
  );
  const tagged = await client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', attributes: { team: 'a', n: 1 } }, 3, 4);
  assert.equal(await tagged.getResult(), 7);
  assert.deepEqual((await tagged.getStatus())?.attributes, { team: 'a', n: 1 });
  assert.deepEqual(
    (await client.listWorkflows({ attributes: { team: 'a' } })).map((s) => s.workflowID),
    [tagged.workflowID],
  );
  await assert.rejects(client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', workflowID: '  ' }), /workflow IDs must be non-empty/);
  await assert.rejects(
    client.enqueue({ queueName: QUEUE, workflowName: 'clientTarget', duplicationPolicy: 'return-existing' }),
    DBOSErrors.DBOSInvalidWorkflowTransitionError,
  );
});

test('enqueuePortable writes portable_json arguments, named ones too, as DBOS does', async () => {
  const h = await client.enqueuePortable({ queueName: UNSERVED, workflowName: 'pyWorkflow', workflowID: 'portable-1' }, [1, 'two'], { three: 3 });
  const row = await requireEngine().request('get_workflow', { workflow_id: h.workflowID, load_payloads: true });
  assert.equal(row.serialization, 'portable_json');
  assert.deepEqual(JSON.parse(row.inputs as string), { positionalArgs: [1, 'two'], namedArgs: { three: 3 } });
  assert.equal(row.name, 'pyWorkflow');
  await client.cancelWorkflow(h.workflowID);
  await assert.rejects(
    client.enqueuePortable({ queueName: UNSERVED, workflowName: 'pyWorkflow', serializationType: 'native' }, [], { a: 1 }),
    TypeError,
  );
});

test('send delivers a message to a waiting workflow', async () => {
  const h = await DBOS.startWorkflow(receiver, { workflowID: 'recv-1' })('greeting');
  await client.send('recv-1', { hello: 'world' }, 'greeting');
  assert.deepEqual(await h.getResult(), { hello: 'world' });
  await assert.rejects(client.send('no-such-workflow', 1), DBOSErrors.DBOSNonExistentWorkflowError);
});

test('getEvent reads a published event, and null when none is set in time', async () => {
  const h = await DBOS.startWorkflow(publisher, { workflowID: 'pub-1' })('ready');
  assert.equal(await client.getEvent<string>('pub-1', 'status'), 'ready');
  await h.getResult();
  assert.equal(await client.getEvent('pub-1', 'other', 0.05), null);
  assert.equal(await client.getEvent('pub-1', 'other', { timeoutSeconds: 0.05 }), null);
});

test('readStream yields a stream until it is closed', async () => {
  const h = await DBOS.startWorkflow(writer, { workflowID: 'stream-1' })([1, 2, 3]);
  const seen: number[] = [];
  for await (const v of client.readStream<number>('stream-1', 'numbers')) seen.push(v);
  assert.deepEqual(seen, [1, 2, 3]);
  assert.equal(await h.getResult(), 3);
  const tail: number[] = [];
  for await (const v of client.readStream<number>('stream-1', 'numbers', { offset: 1 })) tail.push(v);
  assert.deepEqual(tail, [2, 3]);
  assert.equal(await client.readStreamOffset<number>('stream-1', 'numbers', 2), 3);
  await assert.rejects(client.readStreamOffset('stream-1', 'numbers', 5), DBOSErrors.DBOSStreamTimeoutError);
});

test('the client lists, inspects and manages workflows', async () => {
  const listed = await client.listWorkflows({ workflowName: 'clientTarget', status: 'SUCCESS', queueName: QUEUE });
  assert.ok(listed.some((s) => s.workflowID === 'enq-1'));
  assert.ok(listed.every((s) => s.workflowName === 'clientTarget'));

  const steps = await client.listWorkflowSteps('enq-1');
  assert.deepEqual(steps?.map((s) => [s.functionID, s.name, s.output]), [[0, 'addStep', 5]]);

  const waiting = await client.enqueue({ queueName: UNSERVED, workflowName: 'clientTarget', workflowID: 'enq-waiting' }, 4, 5);
  assert.deepEqual(
    (await client.listQueuedWorkflows({ queueName: UNSERVED })).map((s) => s.workflowID),
    ['enq-waiting'],
  );
  await client.cancelWorkflow('enq-waiting');
  await assert.rejects(waiting.getResult(), DBOSErrors.DBOSAwaitedWorkflowCancelledError);
  // Resumed onto the internal queue, the worker of this process runs it.
  const resumed = await client.resumeWorkflow<number>('enq-waiting');
  assert.equal(await resumed.getResult(), 9);

  const forkID = await client.forkWorkflow('enq-1', 1);
  assert.equal(await client.retrieveWorkflow<number>(forkID).getResult(), 5);
  assert.equal((await client.getWorkflow(forkID))?.forkedFrom, 'enq-1');

  const first = await client.waitFirst([client.retrieveWorkflow('enq-1'), client.retrieveWorkflow(forkID)]);
  assert.ok(['enq-1', forkID].includes(first.workflowID));
  assert.equal((await client.waitAll([resumed])).length, 1);

  await client.deleteWorkflow(forkID);
  assert.equal(await client.getWorkflow(forkID), undefined);

  const versions = await client.listApplicationVersions();
  assert.deepEqual(versions.map((v) => v.versionName), [DBOS.applicationVersion]);
  assert.equal((await client.getLatestApplicationVersion()).versionName, DBOS.applicationVersion);
  assert.equal(client.applicationName, APP);
});

test('the client registers a queue: DBOS lists it, this worker serves it under its limits, its setters write through the client', async () => {
  const q = await client.registerQueue('client-registered', { globalConcurrency: 1 });
  assert.equal(q.name, 'client-registered');
  assert.equal(q.concurrency, 1);
  assert.equal(q.applicationName, APP);
  assert.equal(q.clientBound, true);
  const listed = (await DBOS.listQueues()).find((x) => x.name === 'client-registered');
  assert.equal(listed?.concurrency, 1);
  assert.deepEqual((await client.listQueues()).map((x) => x.name).includes('client-registered'), true);

  // This process never declared it: it serves it as stored, one at a time.
  const a = await client.enqueue({ queueName: 'client-registered', workflowName: 'clientHeld' }, 'q-a');
  const b = await client.enqueue({ queueName: 'client-registered', workflowName: 'clientHeld' }, 'q-b');
  await whenHeld(() => held.size === 1, 'one held workflow');
  const [first] = [...held.keys()];
  const queued = await client.listQueuedWorkflows({ queueName: 'client-registered', status: 'ENQUEUED' });
  assert.equal(queued.length, 1, 'the other waits');
  releaseHeld(first);
  const second = first === 'q-a' ? 'q-b' : 'q-a';
  await whenHeld(() => held.has(second), 'the second held workflow');
  releaseHeld(second);
  assert.deepEqual([await a.getResult(), await b.getResult()], ['q-a', 'q-b']);
  assert.equal(heldMax, 1);

  await q.setGlobalConcurrency(3);
  assert.equal((await DBOS.retrieveQueue('client-registered'))?.concurrency, 3);
  assert.equal(await (await client.retrieveQueue('client-registered'))!.getGlobalConcurrency(), 3);

  // A client has no version: the default always_update overwrites, never_update keeps.
  assert.equal((await client.registerQueue('client-registered', { globalConcurrency: 4, onConflict: 'never_update' })).concurrency, 3);
  assert.equal((await client.registerQueue('client-registered', { globalConcurrency: 4 })).concurrency, 4);
  await assert.rejects(
    client.registerQueue('client-registered', { onConflict: 'update_if_latest_version' }),
    /does not support onConflict='update_if_latest_version'/,
  );
  await assert.rejects(client.registerQueue('_dbos_x'), /Queue name _dbos_x is reserved/);

  await client.deleteQueue('client-registered');
  assert.equal(await client.retrieveQueue('client-registered'), null);
  assert.equal(await DBOS.retrieveQueue('client-registered'), null);
});

test('schedules made by the client fire in this worker; trigger, backfill, update and apply', async () => {
  await client.createSchedule({ scheduleName: 'client-each-second', workflowName: 'clientTick', schedule: '* * * * * *', context: { by: 'client' } });
  const s = (await client.getSchedule('client-each-second'))!;
  assert.equal(s.workflowName, 'clientTick');
  assert.equal(s.applicationName, APP);
  assert.deepEqual(s.context, { by: 'client' });
  const fired = await tickOf('sched-client-each-second-');
  assert.ok(fired.scheduled instanceof Date, `scheduled time ${String(fired.scheduled)}`);
  assert.deepEqual(fired.context, { by: 'client' });

  // Paused, its update keeps its status and its last tick.
  await client.pauseSchedule('client-each-second');
  const lastFired = await eventually(async () => (await client.getSchedule('client-each-second'))?.lastFiredAt ?? undefined);
  await client.updateSchedule('client-each-second', { context: { by: 'update' } });
  const updated = (await DBOS.getSchedule('client-each-second'))!;
  assert.equal(updated.status, 'PAUSED');
  assert.deepEqual(updated.context, { by: 'update' });
  assert.ok(updated.lastFiredAt && new Date(updated.lastFiredAt).getTime() >= new Date(lastFired).getTime(), 'last_fired_at kept');
  assert.equal(updated.scheduleId, s.scheduleId);
  await assert.rejects(client.updateSchedule('no-such-schedule', { context: 1 }), /Schedule 'no-such-schedule' not found/);
  await client.resumeSchedule('client-each-second');
  assert.equal((await client.getSchedule('client-each-second'))?.status, 'ACTIVE');
  await client.deleteSchedule('client-each-second');
  assert.equal(await DBOS.getSchedule('client-each-second'), null);

  // Trigger runs it now; backfill enqueues the missed ticks, once each.
  await client.createSchedule({ scheduleName: 'client-nightly', workflowName: 'clientTick', schedule: '0 0 * * *', context: 'nightly' });
  const triggered = await client.triggerSchedule('client-nightly');
  assert.match(triggered.workflowID, /^sched-client-nightly-trigger-/);
  await triggered.getResult();
  const tick = await tickOf(triggered.workflowID);
  assert.ok(tick.scheduled instanceof Date);
  assert.equal(tick.context, 'nightly');
  await assert.rejects(client.triggerSchedule('no-such-schedule'), /Schedule "no-such-schedule" not found/);
  const end = new Date();
  const start = new Date(end.getTime() - 3 * 24 * 3600 * 1000);
  const missed = await client.backfillSchedule('client-nightly', start, end);
  assert.equal(missed.length, 3);
  await Promise.all(missed.map((h) => h.getResult()));
  for (const h of missed) assert.ok((await tickOf(h.workflowID)).scheduled instanceof Date);
  const again = await client.backfillSchedule('client-nightly', start, end);
  assert.deepEqual(again.map((h) => h.workflowID), missed.map((h) => h.workflowID));
  assert.equal(clientTicks.filter((t) => t.workflowID === missed[0].workflowID).length, 1, 'a tick runs once');

  await client.applySchedules([
    { scheduleName: 'client-nightly', workflowName: 'clientTick', schedule: '0 1 * * *', context: 'nightly' },
    { scheduleName: 'client-applied', workflowName: 'clientTick', schedule: '0 2 * * *', queueName: QUEUE },
  ]);
  const nightly = (await client.getSchedule('client-nightly'))!;
  assert.equal(nightly.schedule, '0 1 * * *');
  assert.equal((await client.getSchedule('client-applied'))?.queueName, QUEUE);
  assert.deepEqual(
    (await client.listSchedules({ scheduleNamePrefix: 'client-' })).map((x) => x.scheduleName),
    ['client-applied', 'client-nightly'],
  );
  assert.deepEqual((await client.listSchedules({ workflowName: 'clientTick', status: 'PAUSED' })).map((x) => x.scheduleName), []);
  await client.deleteSchedule('client-applied');
  await client.deleteSchedule('client-nightly');
});

test("renameApplication moves an application's workflows to its new name", async () => {
  const old = await DBOSClient.create({ ...(agent.config(APP) as object), systemDatabaseUrl: agent.databaseUrl, applicationName: 'rename-old' });
  try {
    const h = await old.enqueue({ queueName: UNSERVED, workflowName: 'clientTarget', workflowID: 'renamed-1' }, 1, 2);
    await old.registerQueue('rename-queue');
    assert.equal((await h.getStatus())?.applicationName, 'rename-old');
    await assert.rejects(client.renameApplication(undefined, 'rename-new'), /Nothing to re-own/);
    await assert.rejects(client.renameApplication('rename-old', 'rename-old'), /already holds that name/);
    await assert.rejects(client.renameApplication('rename-old', 'rename-new', { batchSize: 0 }), /batchSize must be a positive integer/);
    const moved = await client.renameApplication('rename-old', 'rename-new');
    assert.equal(moved.workflows, 1);
    assert.equal(moved.queues, 1);
    assert.equal((await client.getWorkflow('renamed-1'))?.applicationName, 'rename-new');
    assert.equal((await client.retrieveQueue('rename-queue'))?.applicationName, 'rename-new');
    assert.deepEqual(await client.renameApplication('rename-old', 'rename-new', { batchSize: null }), { queues: 0, schedules: 0, versions: 0, workflows: 0, steps: 0 });
    await client.cancelWorkflow('renamed-1');
  } finally {
    await old.destroy();
  }
});
