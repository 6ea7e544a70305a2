// Workflows against a real agent, as DBOS TypeScript 5.3 defines them: starts
// and ids, children, idempotency, timeouts, results and their errors, input
// schemas, attributes, identity, and recovery with durable now/randomUUID.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS } from '../src';
import {
  DBOSAwaitedWorkflowCancelledError,
  DBOSWorkflowCancelledError,
  DBOSUnexpectedStepError,
  DBOSWorkflowIDInUseError,
} from '../src/error';
import { Agent, freshAgent } from './harness';
import { officialErrors, officialSerialization as official } from './official';
import { statusRow, stepRows } from './apps/db';
import { Proc } from './apps/proc';

let agent: Agent;

let runs = 0;
const double = DBOS.registerStep(async (x: number) => x * 2, { name: 'double' });
const child = DBOS.registerWorkflow(
  async (x: number) => {
    runs++;
    return { id: DBOS.workflowID, value: await double(x) };
  },
  { name: 'child' },
);

const parent = DBOS.registerWorkflow(
  async (x: number) => {
    const direct = await child(x); // ids 0 (start) and 1 (getResult)
    const h = await DBOS.startWorkflow(child)(x + 1); // id 2
    const started = await h.getResult(); // id 3
    const named = await DBOS.withNextWorkflowID(`${DBOS.workflowID}-named`, () => child(x + 2)); // 4, 5
    return { direct, startedID: h.workflowID, started, named };
  },
  { name: 'parent' },
);

// ---- timeouts ----
const tick = DBOS.registerStep(
  async () => {
    await new Promise((r) => setTimeout(r, 25));
    return 1;
  },
  { name: 'tick' },
);
const loopUntilStopped = DBOS.registerWorkflow(
  async (limit: number) => {
    for (let i = 0; i < limit; i++) await tick();
    return 'finished';
  },
  { name: 'loopUntilStopped' },
);
const timedParent = DBOS.registerWorkflow(
  async () => {
    const h = await DBOS.startWorkflow(loopUntilStopped)(400);
    return h.workflowID;
  },
  { name: 'timedParent' },
);

// ---- results ----
class OrderError extends Error {
  readonly code = 42;
  constructor(message: string) {
    super(message);
    this.name = 'OrderError';
  }
}
const failing = DBOS.registerWorkflow(
  async (kind: string) => {
    await tick();
    if (kind === 'custom') throw new OrderError('order 7 is invalid');
    if (kind === 'type') throw new TypeError('not a number');
    throw new Error('plain failure');
  },
  { name: 'failing' },
);

const awaiter = DBOS.registerWorkflow(
  async (otherID: string) => {
    const early = await DBOS.getResult(otherID, { timeoutSeconds: 0.2 }); // timer at 0, getResult at 1
    const stamp = await DBOS.now(); // 2
    return { early, stamp };
  },
  { name: 'awaiter' },
);

const waiter = DBOS.registerWorkflow(
  async (ids: string[]) => {
    const handles = ids.map((id) => DBOS.retrieveWorkflow<string>(id));
    const first = await DBOS.waitFirst(handles);
    const all = await DBOS.waitAll(handles);
    return { first: first.workflowID, all: all.map((h) => h.workflowID) };
  },
  { name: 'waiter' },
);

// ---- schema, attributes, identity ----
const schemaWorkflow = DBOS.registerWorkflow(async (n: number) => `got ${n}`, {
  name: 'schemaWorkflow',
  inputSchema: {
    parse(input: unknown) {
      const [n] = input as unknown[];
      if (typeof n !== 'number') throw new TypeError(`expected a number, got ${typeof n}`);
      return [n * 10];
    },
  },
});

const identity = DBOS.registerWorkflow(
  async () => ({ user: DBOS.authenticatedUser, roles: DBOS.authenticatedRoles, child: await childIdentity() }),
  { name: 'identity' },
);
const childIdentity = DBOS.registerWorkflow(async () => ({ user: DBOS.authenticatedUser, roles: DBOS.authenticatedRoles }), {
  name: 'childIdentity',
});

before(async () => {
  agent = await freshAgent('workflows');
  DBOS.setConfig(agent.config('workflows-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

test('a direct call and startWorkflow give the same result; children get <parent>-<functionId>, numbered from 0', async () => {
  const direct = await child(4);
  assert.equal(direct.value, 8);
  assert.match(direct.id!, /^[0-9a-f-]{36}$/);
  const h = await DBOS.startWorkflow(parent)(1);
  const p = h.workflowID;
  const r = await h.getResult();
  assert.deepEqual(r, {
    direct: { id: `${p}-0`, value: 2 },
    startedID: `${p}-2`,
    started: { id: `${p}-2`, value: 4 },
    named: { id: `${p}-named`, value: 6 },
  });
  const rows = await stepRows(agent.databaseUrl, p);
  assert.deepEqual(
    rows.map((x) => [x.function_id, x.function_name, x.child_workflow_id]),
    [
      [0, 'child', `${p}-0`],
      [1, 'DBOS.getResult', `${p}-0`],
      [2, 'child', `${p}-2`],
      [3, 'DBOS.getResult', `${p}-2`],
      [4, 'child', `${p}-named`],
      [5, 'DBOS.getResult', `${p}-named`],
    ],
  );
  assert.equal((await statusRow(agent.databaseUrl, `${p}-0`))?.parent_workflow_id, p);
});

test('DBOS.withNextWorkflowID names the next workflow started, once', async () => {
  const id = `wf-next-${Date.now()}`;
  const [a, b] = await DBOS.withNextWorkflowID(id, async () => {
    const first = await DBOS.startWorkflow(child)(1);
    const second = await DBOS.startWorkflow(child)(2);
    return [first.workflowID, second.workflowID];
  });
  assert.equal(a, id);
  assert.notEqual(b, id);
  assert.deepEqual(await DBOS.retrieveWorkflow(id).getResult(), { id, value: 2 });
});

test('the same workflowID started twice is one workflow, run once', async () => {
  const id = `wf-twice-${Date.now()}`;
  runs = 0;
  const h1 = await DBOS.startWorkflow(child, { workflowID: id })(5);
  const h2 = await DBOS.startWorkflow(child, { workflowID: id })(5);
  assert.equal(h1.workflowID, id);
  assert.equal(h2.workflowID, id);
  assert.deepEqual(await h1.getResult(), { id, value: 10 });
  assert.deepEqual(await h2.getResult(), { id, value: 10 });
  const h3 = await DBOS.startWorkflow(child, { workflowID: id })(5);
  assert.deepEqual(await h3.getResult(), { id, value: 10 });
  assert.deepEqual(await DBOS.withNextWorkflowID(id, () => child(5)), { id, value: 10 });
  assert.equal(runs, 1);
});

test("workflowIDReusePolicy 'reject' raises DBOSWorkflowIDInUseError", async () => {
  const id = `wf-reject-${Date.now()}`;
  await (await DBOS.startWorkflow(child, { workflowID: id })(1)).getResult();
  const err = await DBOS.startWorkflow(child, { workflowID: id, workflowIDReusePolicy: 'reject' })(1).then(
    () => assert.fail('expected DBOSWorkflowIDInUseError'),
    (e: unknown) => e as DBOSWorkflowIDInUseError,
  );
  assert.ok(err instanceof DBOSWorkflowIDInUseError, `got ${String(err)}`);
  const expected = new officialErrors.DBOSWorkflowIDInUseError(id, 'SUCCESS', 'child');
  assert.equal(err.message, expected.message);
  assert.equal(err.name, 'DBOSWorkflowIDInUseError');
  assert.equal(err.workflowID, id);
  assert.equal(err.status, 'SUCCESS');
  assert.equal(err.workflowName, 'child');
});

test("timeoutMS: the workflow is cancelled at its deadline; its handle throws DBOSWorkflowCancelledError, another handle DBOSAwaitedWorkflowCancelledError", async () => {
  const h = await DBOS.startWorkflow(loopUntilStopped, { timeoutMS: 300 })(400);
  const err = await h.getResult().then(
    () => assert.fail('expected the workflow to be cancelled'),
    (e: unknown) => e as Error,
  );
  // As DBOS TypeScript: the handle of the run this process executed reports the workflow's own cancellation.
  assert.ok(err instanceof DBOSWorkflowCancelledError, `got ${String(err)}`);
  assert.equal(err.message, new officialErrors.DBOSWorkflowCancelledError(h.workflowID).message);
  const awaited = await DBOS.retrieveWorkflow(h.workflowID).getResult().then(
    () => assert.fail('expected the workflow to be cancelled'),
    (e: unknown) => e as Error,
  );
  assert.ok(awaited instanceof DBOSAwaitedWorkflowCancelledError, `got ${String(awaited)}`);
  assert.equal(awaited.message, new officialErrors.DBOSAwaitedWorkflowCancelledError(h.workflowID).message);
  const status = await h.getStatus();
  assert.equal(status?.status, 'CANCELLED');
  assert.equal(status?.timeoutMS, 300);
  assert.ok(status?.deadlineEpochMS !== undefined);
  const steps = (await stepRows(agent.databaseUrl, h.workflowID)).length;
  assert.ok(steps < 400, `stopped after ${steps} steps`);
});

test('withWorkflowTimeout: a child inherits its parent\'s deadline', async () => {
  const h = await DBOS.withWorkflowTimeout(400, () => DBOS.startWorkflow(timedParent)());
  const childID = await h.getResult();
  assert.equal(childID, `${h.workflowID}-0`);
  const parentRow = await statusRow(agent.databaseUrl, h.workflowID);
  const childRow = await statusRow(agent.databaseUrl, childID);
  assert.equal(Number(parentRow?.workflow_timeout_ms), 400);
  assert.ok(parentRow?.workflow_deadline_epoch_ms !== null);
  assert.equal(String(childRow?.workflow_deadline_epoch_ms), String(parentRow?.workflow_deadline_epoch_ms));
  await assert.rejects(DBOS.retrieveWorkflow(childID).getResult(), DBOSAwaitedWorkflowCancelledError);
});

test('DBOS.getResult(id, {timeoutSeconds}) returns null on timeout, outside and inside a workflow (durably)', async () => {
  const slow = await DBOS.startWorkflow(loopUntilStopped)(30);
  const t0 = Date.now();
  assert.equal(await DBOS.getResult(slow.workflowID, { timeoutSeconds: 0.1 }), null);
  assert.ok(Date.now() - t0 >= 90);
  const h = await DBOS.startWorkflow(awaiter)(slow.workflowID);
  const r = await h.getResult();
  assert.equal(r.early, null);
  // DBOS TS takes the timer's id first (a DBOS.sleep holding the deadline), then the getResult's.
  const rows = await stepRows(agent.databaseUrl, h.workflowID);
  assert.deepEqual(
    rows.map((x) => [x.function_id, x.function_name]),
    [
      [0, 'DBOS.sleep'],
      [1, 'DBOS.getResult'],
      [2, 'DBOS.now'],
    ],
  );
  assert.equal(await DBOS.getResult(slow.workflowID, { timeoutSeconds: 30 }), 'finished');
  assert.equal(await DBOS.getResult(slow.workflowID), 'finished');
});

test('waitFirst and waitAll, from outside and inside a workflow', async () => {
  const quick = await DBOS.startWorkflow(loopUntilStopped)(1);
  const slower = await DBOS.startWorkflow(loopUntilStopped)(12);
  const first = await DBOS.waitFirst([slower, quick]);
  assert.equal(first.workflowID, quick.workflowID);
  const all = await DBOS.waitAll([slower, quick]);
  assert.deepEqual(
    all.map((x) => x.workflowID),
    [slower.workflowID, quick.workflowID],
  );
  assert.equal((await slower.getStatus())?.status, 'SUCCESS');
  const a = await DBOS.startWorkflow(loopUntilStopped)(1);
  const b = await DBOS.startWorkflow(loopUntilStopped)(12);
  const w = await DBOS.startWorkflow(waiter)([b.workflowID, a.workflowID]);
  assert.deepEqual(await w.getResult(), { first: a.workflowID, all: [b.workflowID, a.workflowID] });
  const rows = await stepRows(agent.databaseUrl, w.workflowID);
  assert.deepEqual(
    rows.map((x) => x.function_name),
    ['DBOS.waitFirst', 'DBOS.waitAll'],
  );
  await assert.rejects(DBOS.waitFirst([]));
});

test('errors thrown by a workflow reach getResult as DBOS TS delivers them', async () => {
  // The handle of a run executed here throws the error as thrown.
  const h = await DBOS.startWorkflow(failing)('custom');
  const live = await h.getResult().then(
    () => assert.fail('expected an error'),
    (e: unknown) => e as OrderError,
  );
  assert.ok(live instanceof OrderError);
  assert.equal(live.message, 'order 7 is invalid');
  // A retrieved handle reads the stored error: what DBOS TS's deserializer makes of the row.
  const row = await statusRow(agent.databaseUrl, h.workflowID);
  const theirs = await official.deserializeResError(row!.error as string, (row!.serialization as string) ?? null, official.DBOSJSON);
  for (const kind of ['custom', 'type', 'plain']) {
    const hh = await DBOS.startWorkflow(failing)(kind);
    await hh.getResult().catch(() => undefined);
    const stored = await DBOS.retrieveWorkflow(hh.workflowID).getResult().then(
      () => assert.fail('expected an error'),
      (e: unknown) => e as Error & { code?: number },
    );
    assert.ok(!(stored instanceof OrderError), 'a stored error is not the class thrown');
    const r = await statusRow(agent.databaseUrl, hh.workflowID);
    const off = (await official.deserializeResError(r!.error as string, (r!.serialization as string) ?? null, official.DBOSJSON)) as Error & {
      code?: number;
    };
    assert.equal(stored.name, off.name, kind);
    assert.equal(stored.message, off.message, kind);
    assert.equal(stored.code, off.code, kind);
    assert.equal(stored.constructor.name, off.constructor.name, kind);
    const viaGetResult = await DBOS.getResult(hh.workflowID).then(
      () => assert.fail('expected an error'),
      (e: unknown) => e as Error,
    );
    assert.equal(viaGetResult.message, off.message);
  }
  assert.equal(theirs.name, 'OrderError');
  assert.equal(theirs.message, 'order 7 is invalid');
});

test('inputSchema validates (and transforms) the arguments in the workflow', async () => {
  assert.equal(await schemaWorkflow(2), 'got 20');
  const h = await DBOS.startWorkflow(schemaWorkflow)('two' as unknown as number);
  const err = await h.getResult().then(
    () => assert.fail('expected a schema error'),
    (e: unknown) => e as Error,
  );
  assert.ok(err instanceof TypeError);
  assert.equal(err.message, 'expected a number, got string');
  assert.equal((await h.getStatus())?.status, 'ERROR');
});

test('workflowAttributes are stored and read back', async () => {
  const attributes = { team: 'payments', priority: 3, tags: ['a', 'b'] };
  const h = await DBOS.startWorkflow(child, { workflowAttributes: attributes })(1);
  await h.getResult();
  assert.deepEqual((await h.getStatus())?.attributes, attributes);
  const row = await statusRow(agent.databaseUrl, h.workflowID);
  assert.deepEqual(typeof row?.attributes === 'string' ? JSON.parse(row.attributes) : row?.attributes, attributes);
  await assert.rejects(DBOS.startWorkflow(child, { workflowAttributes: [] as unknown as Record<string, unknown> })(1), {
    message: 'Invalid workflow attributes: must be a key-value object, got array.',
  });
});

test('withAuthedContext: the user and roles reach the workflow and its child, and are stored on the rows', async () => {
  const h = await DBOS.withAuthedContext('alice', ['admin', 'clerk'], () => DBOS.startWorkflow(identity)());
  const expected = { user: 'alice', roles: ['admin', 'clerk'] };
  assert.deepEqual(await h.getResult(), { ...expected, child: expected });
  for (const id of [h.workflowID, `${h.workflowID}-0`]) {
    const row = await statusRow(agent.databaseUrl, id);
    assert.equal(row?.authenticated_user, 'alice');
    assert.deepEqual(JSON.parse(row?.authenticated_roles as string), ['admin', 'clerk']);
    const status = await DBOS.getWorkflowStatus(id);
    assert.equal(status?.authenticatedUser, 'alice');
    assert.deepEqual(status?.authenticatedRoles, ['admin', 'clerk']);
  }
  const p = await DBOS.startWorkflow(identity, { authenticatedUser: 'bob', authenticatedRoles: ['viewer'] })();
  assert.deepEqual((await p.getResult()).user, 'bob');
});

test('after a crash, DBOS.now() and DBOS.randomUUID() replay their first values; changed code raises DBOSUnexpectedStepError', async () => {
  const config = agent.config('recovery-app');
  const id = `wf-recover-${Date.now()}`;
  const first = Proc.worker('recovery-worker', config, { BLOCK: '1', START: id });
  const firstValues = await first.waitForEvent((e) => e.event === 'values' && e.workflowID === id);
  await first.waitForEvent((e) => e.event === 'blocked');
  await first.kill();
  const second = Proc.worker('recovery-worker', config, { BLOCK: '0' });
  try {
    const again = await second.waitForEvent((e) => e.event === 'values' && e.workflowID === id);
    assert.equal(again.now, firstValues.now);
    assert.equal(again.uuid, firstValues.uuid);
    assert.deepEqual(await DBOS.retrieveWorkflow(id).getResult(), { label: 'first', now: firstValues.now, uuid: firstValues.uuid });
  } finally {
    await second.kill();
  }
  // A worker running other code replays the same history: its first step differs.
  const id2 = `wf-nondet-${Date.now()}`;
  const third = Proc.worker('recovery-worker', config, { BLOCK: '1', START: id2 });
  await third.waitForEvent((e) => e.event === 'blocked');
  await third.kill();
  const fourth = Proc.worker('recovery-worker', config, { BLOCK: '0', NONDET: '1' });
  try {
    const err = await DBOS.retrieveWorkflow(id2).getResult().then(
      () => assert.fail('expected DBOSUnexpectedStepError'),
      (e: unknown) => e as Error,
    );
    const expected = new officialErrors.DBOSUnexpectedStepError(id2, 0, 'otherStep', 'DBOS.now');
    assert.equal(err.message, expected.message);
    assert.ok(err instanceof DBOSUnexpectedStepError || err.name === expected.name, `got ${err.name}`);
  } finally {
    await fourth.kill();
  }
});
