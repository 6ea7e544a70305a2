/**
 * The binding and the official DBOS TypeScript SDK 5.3 on one system
 * database, the one the agent serves: what the binding runs, the official
 * DBOSClient and `dbos` CLI list, await and decode; what the official client
 * enqueues runs in the binding's worker with its inputs decoded, and the
 * official client reads its outcome. The official SDK runs no worker here
 * (a client only), so it takes no run from the binding.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { DBOS } from '../src';
import { addHelloContributor } from '../src/dbos';
import { Agent, freshAgent } from './harness';
import { richValue as rich } from './apps/comm-values';

const APP = 'interop-app';
const QUEUE = 'interop_queue';
let agent: Agent;
let client: DBOSClient;

// Until the queue API is merged, the worker serves the queue through its hello.
addHelloContributor({
  hello(body) {
    body.queues = [...((body.queues as unknown[]) ?? []), { name: QUEUE }];
  },
});

const addOne = DBOS.registerStep(async (n: number) => n + 1, { name: 'addOne' });

const richWorkflow = DBOS.registerWorkflow(
  async (label: string, v: ReturnType<typeof rich>) => {
    const n = await addOne(41);
    const when = await DBOS.runStep(async () => new Date(v.when.getTime() + 1000), { name: 'later' });
    return { label, n, when, tags: v.tags, ids: v.ids, big: v.big * 2n, nested: v.nested };
  },
  { name: 'richWorkflow' },
);

const failingWorkflow = DBOS.registerWorkflow(
  async (why: string) => {
    await addOne(1);
    throw new RangeError(`refused: ${why}`);
  },
  { name: 'failingWorkflow' },
);

/** Enqueued by the official client: says what its inputs arrived as, and echoes them. */
DBOS.registerWorkflow(
  async (when: Date, tags: Map<string, number>, big: bigint, nested: { a: { b: number[] } }) => {
    const kinds = [when instanceof Date, tags instanceof Map, typeof big, Array.isArray(nested.a.b)];
    const doubled = await addOne(Number(big));
    return { kinds, when, tags, big, nested, doubled, workflowID: DBOS.workflowID };
  },
  { name: 'enqueuedWorkflow' },
);

/** Enqueued portably (as another language would): portable JSON in and out. */
DBOS.registerWorkflow(
  async (order: { id: string; items: { sku: string; qty: number }[] }, note: string | null) => {
    const total = await DBOS.runStep(async () => order.items.reduce((s, i) => s + i.qty, 0), { name: 'total' });
    return { id: order.id, total, note, skus: order.items.map((i) => i.sku) };
  },
  { name: 'portableWorkflow' },
);

/** A portable workflow of the binding: its outcome is portable JSON any SDK reads. */
const portableOut = DBOS.registerWorkflow(
  async (x: { when: string; n: number }) => ({ seen: x, at: new Date('2026-01-01T00:00:00.000Z'), list: [1, 2, 3], flag: false }),
  { name: 'portableOut', serialization: 'portable' },
);

before(async () => {
  agent = await freshAgent('interop');
  DBOS.setConfig(agent.config(APP) as never);
  await DBOS.launch();
  client = await DBOSClient.create({ systemDatabaseUrl: agent.databaseUrl, applicationName: APP });
});

after(async () => {
  await client?.destroy();
  await DBOS.shutdown();
  await agent.cleanup();
});

async function row(workflowID: string): Promise<Record<string, unknown>> {
  const c = new Client(agent.databaseUrl);
  await c.connect();
  try {
    // DBOS 5.3 keeps the payloads in tables of their own.
    const r = await c.query(
      `SELECT s.*, i.inputs AS stored_inputs, o.output AS stored_output
         FROM dbos.workflow_status s
         LEFT JOIN dbos.workflow_input i USING (workflow_uuid)
         LEFT JOIN dbos.workflow_output o USING (workflow_uuid)
        WHERE s.workflow_uuid = $1`,
      [workflowID],
    );
    assert.equal(r.rows.length, 1);
    return r.rows[0];
  } finally {
    await c.end();
  }
}

function expectedRich(label: string) {
  const v = rich();
  return { label, n: 42, when: new Date(v.when.getTime() + 1000), tags: v.tags, ids: v.ids, big: v.big * 2n, nested: v.nested };
}

test('a workflow the binding ran is listed, awaited and decoded by the official DBOSClient', async () => {
  const handle = await DBOS.startWorkflow(richWorkflow, { workflowID: 'interop-rich-1' })('first', rich());
  assert.deepEqual(await handle.getResult(), expectedRich('first'));

  const listed = await client.listWorkflows({ workflowIDs: ['interop-rich-1'] });
  assert.equal(listed.length, 1);
  assert.equal(listed[0].status, 'SUCCESS');
  assert.equal(listed[0].workflowName, 'richWorkflow');
  assert.equal(listed[0].applicationName, APP);
  assert.deepEqual(listed[0].input, ['first', rich()]);
  assert.deepEqual(listed[0].output, expectedRich('first'));
  assert.deepEqual(await client.retrieveWorkflow('interop-rich-1').getResult(), expectedRich('first'));
  const byName = await client.listWorkflows({ workflowName: 'richWorkflow' });
  assert.deepEqual(byName.map((s) => s.workflowID), ['interop-rich-1']);

  const steps = await client.listWorkflowSteps('interop-rich-1');
  assert.deepEqual(
    steps?.map((s) => [s.functionID, s.name, s.output]),
    [
      [0, 'addOne', 42],
      [1, 'later', new Date(rich().when.getTime() + 1000)],
    ],
  );
});

test("a workflow's error crosses to the official client with its class name and message", async () => {
  const handle = await DBOS.startWorkflow(failingWorkflow, { workflowID: 'interop-fail-1' })('no stock');
  await assert.rejects(handle.getResult(), { name: 'RangeError', message: 'refused: no stock' });
  await assert.rejects(client.retrieveWorkflow('interop-fail-1').getResult(), { name: 'RangeError', message: 'refused: no stock' });
  const status = await client.getWorkflow('interop-fail-1');
  assert.equal(status?.status, 'ERROR');
  assert.equal((status?.error as Error).message, 'refused: no stock');
});

test('the official dbos CLI lists and gets the workflows the binding ran', async () => {
  const cli = join(__dirname, '..', '..', 'node_modules', '.bin', 'dbos');
  const run = promisify(execFile);
  const env = { ...process.env, DBOS_SYSTEM_DATABASE_URL: undefined };
  const listed = await run(cli, ['workflow', 'list', '-s', agent.databaseUrl, '-n', 'richWorkflow'], { env });
  const rows = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
  assert.deepEqual(
    rows.map((r) => [r.workflowID, r.status, r.workflowName, r.applicationName]),
    [['interop-rich-1', 'SUCCESS', 'richWorkflow', APP]],
  );
  assert.match(String(rows[0].output), /12345678901234567890|24691357802469135780/);
  const got = await run(cli, ['workflow', 'get', 'interop-fail-1', '-s', agent.databaseUrl], { env });
  const status = JSON.parse(got.stdout) as Record<string, unknown>;
  assert.equal(status.status, 'ERROR');
  assert.match(String(status.error), /refused: no stock/);
  const steps = await run(cli, ['workflow', 'steps', 'interop-rich-1', '-s', agent.databaseUrl], { env });
  assert.deepEqual(
    (JSON.parse(steps.stdout) as Array<{ name: string }>).map((s) => s.name),
    ['addOne', 'later'],
  );
});

test('a workflow the official client enqueues by name runs in the binding worker with its inputs decoded', async () => {
  const nested = { a: { b: [1, 2, 3] } };
  const handle = await client.enqueue(
    { queueName: QUEUE, workflowName: 'enqueuedWorkflow', workflowID: 'interop-enq-1' },
    new Date('2026-05-06T07:08:09.010Z'),
    new Map([['k', 1]]),
    41n,
    nested,
  );
  const expected = {
    kinds: [true, true, 'bigint', true],
    when: new Date('2026-05-06T07:08:09.010Z'),
    tags: new Map([['k', 1]]),
    big: 41n,
    nested,
    doubled: 42,
    workflowID: 'interop-enq-1',
  };
  assert.deepEqual(await handle.getResult(), expected);
  // The binding reads the same row back the same way.
  assert.deepEqual(await DBOS.retrieveWorkflow('interop-enq-1').getResult(), expected);
  const status = await client.getWorkflow('interop-enq-1');
  assert.equal(status?.status, 'SUCCESS');
  assert.equal(status?.queueName, QUEUE);
  assert.equal((await row('interop-enq-1')).executor_id, DBOS.executorID);
});

test('a portable enqueue of the official client (as another language makes it) runs here and answers in portable JSON', async () => {
  const order = { id: 'o-7', items: [{ sku: 'a', qty: 2 }, { sku: 'b', qty: 5 }] };
  const handle = await client.enqueuePortable<{ id: string; total: number }>(
    { queueName: QUEUE, workflowName: 'portableWorkflow', workflowID: 'interop-port-1' },
    [order, null],
  );
  const expected = { id: 'o-7', total: 7, note: null, skus: ['a', 'b'] };
  assert.deepEqual(await handle.getResult(), expected);
  assert.deepEqual(await DBOS.retrieveWorkflow('interop-port-1').getResult(), expected);
  const r = await row('interop-port-1');
  assert.equal(r.serialization, 'portable_json');
  assert.deepEqual(JSON.parse(r.stored_output as string), expected);
});

test("a portable workflow of the binding: its row is plain JSON, and the official client reads it", async () => {
  const handle = await DBOS.startWorkflow(portableOut, { workflowID: 'interop-port-2' })({ when: '2026-02-02', n: 2 });
  const expected = { seen: { when: '2026-02-02', n: 2 }, at: '2026-01-01T00:00:00.000Z', list: [1, 2, 3], flag: false };
  assert.deepEqual(await handle.getResult(), expected);
  assert.deepEqual(await client.retrieveWorkflow('interop-port-2').getResult(), expected);
  const r = await row('interop-port-2');
  assert.equal(r.serialization, 'portable_json');
  assert.deepEqual(JSON.parse(r.stored_output as string), expected);
  assert.deepEqual(JSON.parse(r.stored_inputs as string), { positionalArgs: [{ when: '2026-02-02', n: 2 }] });
});
