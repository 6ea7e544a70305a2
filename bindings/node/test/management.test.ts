/**
 * Workflow management against a real agent: listings with DBOS's filters,
 * steps, cancel, resume, fork, delete, versions, and management calls made
 * from workflow code (durable steps, replayed after a resume).
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS, Error as DBOSErrors } from '../src';
import type { WorkflowStatus } from '../src';
import { AgentLink } from '../src/connection';
import { resolveEndpoint } from '../src/transport';
import { requireEngine } from '../src/dbos';
import { Agent, freshAgent } from './harness';

let agent: Agent;
const APP = 'mgmt-app';
/** A queue no worker serves: what is enqueued there waits ENQUEUED. */
const UNSERVED = 'mgmt-unserved';

/** A one-shot signal a test awaits instead of sleeping. */
class Latch {
  private resolveFn!: () => void;
  readonly promise = new Promise<void>((r) => (this.resolveFn = r));
  open(): void {
    this.resolveFn();
  }
}

const counts = new Map<string, number>();
function bump(key: string): number {
  const n = (counts.get(key) ?? 0) + 1;
  counts.set(key, n);
  return n;
}

// ---- workflows ---------------------------------------------------------------

const childWf = DBOS.registerWorkflow(async (x: number) => x * 10, { name: 'mgmtChild' });

const stepOne = DBOS.registerStep(async (x: number) => x + 1, { name: 'stepOne' });
const stepTwo = DBOS.registerStep(async (x: number) => ({ doubled: x * 2 }), { name: 'stepTwo' });

const listedWf = DBOS.registerWorkflow(
  async (x: number) => {
    const a = await stepOne(x);
    const b = await stepTwo(a);
    const child = await DBOS.startWorkflow(childWf)(x);
    const c = await child.getResult();
    return { a, b, c };
  },
  { name: 'listedWf' },
);

let gate = new Latch();
let entered = new Latch();
const blockA = DBOS.registerStep(async () => bump('blockA'), { name: 'blockA' });
const blockB = DBOS.registerStep(
  async () => {
    bump('blockB');
    entered.open();
    await gate.promise;
  },
  { name: 'blockB' },
);
const blockC = DBOS.registerStep(async () => bump('blockC'), { name: 'blockC' });
const blockingWf = DBOS.registerWorkflow(
  async () => {
    await blockA();
    await blockB();
    await blockC();
    return 'done';
  },
  { name: 'blockingWf' },
);

const forkSteps = [0, 1, 2].map((i) => DBOS.registerStep(async (x: number) => (bump(`fork${i}`), x + i), { name: `forkStep${i}` }));
const forkWf = DBOS.registerWorkflow(
  async (x: number) => {
    let v = x;
    for (const s of forkSteps) v = await s(v);
    return v;
  },
  { name: 'forkWf' },
);

const unservedWf = DBOS.registerWorkflow(async () => 'never', { name: 'unservedWf' });

let mgmtEntered = new Latch();
/** The first run waits here until it is cancelled; later runs go straight on. */
const mgmtWait = DBOS.registerStep(
  async () => {
    if (bump('mgmtWait') > 1) return;
    mgmtEntered.open();
    const signal = DBOS.stepStatus!.cancelSignal!;
    await new Promise<void>((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r(), { once: true })));
  },
  { name: 'mgmtWait' },
);
const managingWf = DBOS.registerWorkflow(
  async (target: string) => {
    await DBOS.cancelWorkflow(target);
    const listed = await DBOS.listWorkflows({ workflowIDs: [target] });
    await mgmtWait();
    return listed.map((s) => s.workflowID);
  },
  { name: 'managingWf' },
);

// ---- set-up ------------------------------------------------------------------

before(async () => {
  agent = await freshAgent('mgmt');
  DBOS.setConfig(agent.config(APP) as never);
  await DBOS.launch();
  for (const i of [1, 2, 3]) {
    await DBOS.startWorkflow(listedWf, { workflowID: `lw-${i}` })(i).then((h) => h.getResult());
  }
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

const ids = (list: WorkflowStatus[]) => list.map((s) => s.workflowID);

// ---- listings ----------------------------------------------------------------

test('listWorkflows filters by name, status and ids, and decodes inputs and outputs', async () => {
  const byName = await DBOS.listWorkflows({ workflowName: 'listedWf' });
  assert.deepEqual(ids(byName), ['lw-1', 'lw-2', 'lw-3']);
  assert.deepEqual(byName[1].input, [2]);
  assert.deepEqual(byName[1].output, { a: 3, b: { doubled: 6 }, c: 20 });
  assert.equal(byName[1].status, 'SUCCESS');
  assert.equal(byName[1].applicationName, APP);
  assert.equal(byName[1].wasForkedFrom, false);

  const children = await DBOS.listWorkflows({ workflowName: ['mgmtChild'], status: 'SUCCESS' });
  assert.deepEqual(ids(children).sort(), ['lw-1-2', 'lw-2-2', 'lw-3-2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ parentWorkflowID: 'lw-2' })), ['lw-2-2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: ['listedWf', 'mgmtChild'], hasParent: false })), ['lw-1', 'lw-2', 'lw-3']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowIDs: ['lw-3', 'lw-1', 'nope'] })).sort(), ['lw-1', 'lw-3']);
  assert.deepEqual(await DBOS.listWorkflows({ workflowIDs: [] }), []);
  assert.deepEqual(await DBOS.listWorkflows({ workflowName: 'listedWf', status: ['ERROR', 'CANCELLED'] }), []);

  const bare = await DBOS.listWorkflows({ workflowIDs: ['lw-1'], loadInput: false, loadOutput: false });
  assert.equal(bare[0].input, undefined);
  assert.equal(bare[0].output, undefined);
  const inputOnly = await DBOS.listWorkflows({ workflowIDs: ['lw-1'], loadOutput: false });
  assert.deepEqual(inputOnly[0].input, [1]);
  assert.equal(inputOnly[0].output, undefined);
});

test('listWorkflows takes a time range as ISO strings, and pages with limit, offset and sortDesc', async () => {
  const [, second] = await DBOS.listWorkflows({ workflowName: 'listedWf' });
  const at = new Date(second.createdAt).toISOString();
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf', startTime: at })), ['lw-2', 'lw-3']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf', endTime: at })), ['lw-1', 'lw-2']);
  const completed = new Date(second.completedAt!).toISOString();
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf', completedBefore: completed })), ['lw-1', 'lw-2']);

  assert.deepEqual(ids(await DBOS.listWorkflows({ workflow_id_prefix: 'lw-', hasParent: false, limit: 2 })), ['lw-1', 'lw-2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflow_id_prefix: 'lw-', hasParent: false, limit: 2, sortDesc: true })), ['lw-3', 'lw-2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf', offset: 1 })), ['lw-2', 'lw-3']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf', offset: 1, limit: 1, sortDesc: true })), ['lw-2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflow_id_prefix: ['lw-1', 'lw-3'], hasParent: false })), ['lw-1', 'lw-3']);
});

test('listQueuedWorkflows lists what waits on a queue, without outputs', async () => {
  const h = await DBOS.startWorkflow(unservedWf, { workflowID: 'queued-1', queueName: UNSERVED })();
  const queued = await DBOS.listQueuedWorkflows({ queueName: UNSERVED });
  assert.deepEqual(ids(queued), ['queued-1']);
  assert.equal(queued[0].status, 'ENQUEUED');
  assert.equal(queued[0].queueName, UNSERVED);
  assert.deepEqual(queued[0].input, []);
  // Finished workflows are never queued ones, whatever the filter says.
  assert.deepEqual(await DBOS.listQueuedWorkflows({ workflowName: 'listedWf' }), []);
  assert.deepEqual(await DBOS.listQueuedWorkflows({ queueName: UNSERVED, status: 'SUCCESS' }), []);
  await DBOS.cancelWorkflow(h.workflowID);
  assert.deepEqual(await DBOS.listQueuedWorkflows({ queueName: UNSERVED }), []);
});

test('listWorkflowSteps gives the steps, the child and the await, decoded', async () => {
  const steps = await DBOS.listWorkflowSteps('lw-2');
  assert.ok(steps);
  assert.deepEqual(
    steps.map((s) => [s.functionID, s.name, s.childWorkflowID]),
    [
      [0, 'stepOne', null],
      [1, 'stepTwo', null],
      [2, 'mgmtChild', 'lw-2-2'],
      [3, 'DBOS.getResult', 'lw-2-2'],
    ],
  );
  assert.equal(steps[0].output, 3);
  assert.deepEqual(steps[1].output, { doubled: 6 });
  assert.equal(steps[3].output, 20);
  assert.equal(steps[0].error, null);
  assert.ok(steps[0].startedAtEpochMs! <= steps[0].completedAtEpochMs!);
  const page = await DBOS.listWorkflowSteps('lw-2', { offset: 1, limit: 2 });
  assert.deepEqual(page?.map((s) => s.functionID), [1, 2]);
  assert.equal(await DBOS.listWorkflowSteps('no-such-workflow'), undefined);
});

// ---- cancel, resume, fork, delete --------------------------------------------

test('a cancelled workflow stops at its next step; resumed, it completes without re-running its recorded steps', async () => {
  gate = new Latch();
  entered = new Latch();
  const h = await DBOS.startWorkflow(blockingWf, { workflowID: 'blocking-1' })();
  await entered.promise;
  await DBOS.cancelWorkflow(h.workflowID);
  gate.open();
  // The handle of a run this process executes reports the workflow's own
  // cancellation, as DBOS TypeScript's does; another handle, an awaiter's.
  await assert.rejects(h.getResult(), DBOSErrors.DBOSWorkflowCancelledError);
  await assert.rejects(DBOS.retrieveWorkflow(h.workflowID).getResult(), DBOSErrors.DBOSAwaitedWorkflowCancelledError);
  assert.equal((await h.getStatus())?.status, 'CANCELLED');
  assert.equal(counts.get('blockC'), undefined);
  assert.deepEqual((await DBOS.listWorkflowSteps(h.workflowID))?.map((s) => s.name), ['blockA']);

  const resumed = await DBOS.resumeWorkflow<string>(h.workflowID);
  assert.equal(resumed.workflowID, h.workflowID);
  assert.equal(await resumed.getResult(), 'done');
  assert.equal(counts.get('blockA'), 1);
  assert.equal(counts.get('blockB'), 2);
  assert.equal(counts.get('blockC'), 1);
  assert.equal((await DBOS.getWorkflowStatus(h.workflowID))?.status, 'SUCCESS');
});

test('resumeWorkflows refuses all when one id names no workflow', async () => {
  await assert.rejects(DBOS.resumeWorkflows(['blocking-1', 'no-such-workflow']), DBOSErrors.DBOSNonExistentWorkflowError);
  // Cancelling what does not exist changes nothing, as in DBOS.
  await DBOS.cancelWorkflow('no-such-workflow');
});

test('forkWorkflow copies the steps below startStep and runs the rest anew', async () => {
  const original = await DBOS.startWorkflow(forkWf, { workflowID: 'fork-orig' })(10);
  assert.equal(await original.getResult(), 13);
  const fork = await DBOS.forkWorkflow<number>('fork-orig', 2, { newWorkflowID: 'fork-copy' });
  assert.equal(fork.workflowID, 'fork-copy');
  assert.equal(await fork.getResult(), 13);
  assert.deepEqual([counts.get('fork0'), counts.get('fork1'), counts.get('fork2')], [1, 1, 2]);
  const status = await fork.getStatus();
  assert.equal(status?.forkedFrom, 'fork-orig');
  assert.equal((await DBOS.getWorkflowStatus('fork-orig'))?.wasForkedFrom, true);
  assert.deepEqual((await DBOS.listWorkflowSteps('fork-copy'))?.map((s) => s.name), ['forkStep0', 'forkStep1', 'forkStep2']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ forkedFrom: 'fork-orig' })), ['fork-copy']);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'forkWf', isFork: false })), ['fork-orig']);

  const generated = await DBOS.forkWorkflow<number>('fork-orig', 0);
  assert.notEqual(generated.workflowID, 'fork-orig');
  assert.equal(await generated.getResult(), 13);
  assert.deepEqual([counts.get('fork0'), counts.get('fork1'), counts.get('fork2')], [2, 2, 3]);
});

test('rewindWorkflow re-runs an ended workflow under its own id from a step', async () => {
  const before = [counts.get('fork0'), counts.get('fork1'), counts.get('fork2')];
  const h = await DBOS.rewindWorkflow<number>('fork-orig', { startStep: 1 });
  assert.equal(h.workflowID, 'fork-orig');
  assert.equal(await h.getResult(), 13);
  assert.deepEqual([counts.get('fork0'), counts.get('fork1'), counts.get('fork2')], [before[0], before[1]! + 1, before[2]! + 1]);
});

test('deleteWorkflow removes a workflow, and with deleteChildren its children', async () => {
  await DBOS.deleteWorkflow('lw-3');
  assert.equal(await DBOS.getWorkflowStatus('lw-3'), null);
  assert.equal((await DBOS.getWorkflowStatus('lw-3-2'))?.status, 'SUCCESS');
  await DBOS.deleteWorkflows(['lw-1'], true);
  assert.equal(await DBOS.getWorkflowStatus('lw-1'), null);
  assert.equal(await DBOS.getWorkflowStatus('lw-1-2'), null);
  assert.deepEqual(ids(await DBOS.listWorkflows({ workflowName: 'listedWf' })), ['lw-2']);
});

test('setWorkflowDelay and setWorkflowPriority check their arguments as DBOS does', async () => {
  await assert.rejects(DBOS.setWorkflowDelay('lw-2', 0), /delaySeconds must be greater than 0/);
  // A workflow that is not DELAYED is left as it is.
  await DBOS.setWorkflowDelay('lw-2', { delaySeconds: 5 });
  assert.equal((await DBOS.getWorkflowStatus('lw-2'))?.status, 'SUCCESS');
  await assert.rejects(DBOS.setWorkflowPriority('lw-2', -1), DBOSErrors.DBOSInvalidQueuePriorityError);

  const delayed = await DBOS.startWorkflow(unservedWf, {
    workflowID: 'delayed-1',
    queueName: UNSERVED,
    enqueueOptions: { delaySeconds: 3600 },
  })();
  const first = await delayed.getStatus();
  assert.equal(first?.status, 'DELAYED');
  const until = Date.now() + 7200_000;
  await DBOS.setWorkflowDelay(delayed.workflowID, { delayUntilEpochMS: until });
  const moved = await delayed.getStatus();
  assert.equal(moved?.status, 'DELAYED');
  assert.equal(moved?.delayUntilEpochMS, until);
  // A waiting workflow takes a new priority; an ended one keeps its own.
  await DBOS.setWorkflowPriority(delayed.workflowID, 9);
  assert.equal((await delayed.getStatus())?.priority, 9);
  await DBOS.setWorkflowPriority('lw-2', 4);
  assert.equal((await DBOS.getWorkflowStatus('lw-2'))?.priority, 0);
  await DBOS.cancelWorkflow(delayed.workflowID);
});

// ---- from workflow code --------------------------------------------------------

test('management from workflow code is a durable step: a resumed workflow does not cancel again', async () => {
  const target = await DBOS.startWorkflow(unservedWf, { workflowID: 'managed-target', queueName: UNSERVED })();
  mgmtEntered = new Latch();
  const h = await DBOS.startWorkflow(managingWf, { workflowID: 'managing-1' })(target.workflowID);
  await mgmtEntered.promise;
  assert.equal((await target.getStatus())?.status, 'CANCELLED');
  assert.deepEqual(
    (await DBOS.listWorkflowSteps(h.workflowID))?.map((s) => s.name),
    ['DBOS.cancelWorkflow', 'DBOS.listWorkflows'],
  );

  // The target goes back on its queue; the manager is cancelled, then resumed with its history.
  await DBOS.resumeWorkflow(target.workflowID, { queueName: UNSERVED });
  assert.equal((await target.getStatus())?.status, 'ENQUEUED');
  await DBOS.cancelWorkflow(h.workflowID);
  await assert.rejects(h.getResult(), DBOSErrors.DBOSWorkflowCancelledError);
  const resumed = await DBOS.resumeWorkflow<string[]>(h.workflowID);
  assert.deepEqual(await resumed.getResult(), ['managed-target']);
  assert.equal(counts.get('mgmtWait'), 2);
  assert.equal((await target.getStatus())?.status, 'ENQUEUED');
  await DBOS.cancelWorkflow(target.workflowID);
});

test('a workflow recovered after its worker reconnects replays its management steps: no second cancel', async () => {
  const target = await DBOS.startWorkflow(unservedWf, { workflowID: 'recovered-target', queueName: UNSERVED })();
  counts.delete('mgmtWait');
  mgmtEntered = new Latch();
  const h = await DBOS.startWorkflow(managingWf, { workflowID: 'recovering-1' })(target.workflowID);
  await mgmtEntered.promise;
  assert.equal((await target.getStatus())?.status, 'CANCELLED');
  await DBOS.resumeWorkflow(target.workflowID, { queueName: UNSERVED });

  // The worker's connection drops mid-run: the agent hands the run back and pushes it again
  // once the worker has reconnected.
  requireEngine().link.current!.close();
  assert.deepEqual(await h.getResult(), ['recovered-target']);
  assert.equal(counts.get('mgmtWait'), 2);
  assert.ok(((await h.getStatus())?.recoveryAttempts ?? 0) >= 2);
  assert.equal((await target.getStatus())?.status, 'ENQUEUED');
  await DBOS.cancelWorkflow(target.workflowID);
});

// ---- versions (last: it registers another version) -----------------------------

test('application versions: listed latest first, promoted with setLatestApplicationVersion', async () => {
  const mine = DBOS.applicationVersion;
  const versions = await DBOS.listApplicationVersions();
  assert.ok(versions.some((v) => v.versionName === mine));
  assert.equal((await DBOS.getLatestApplicationVersion()).versionName, mine);

  // A second worker of the application announces another version: the newest is the latest.
  const other = new AgentLink({
    endpoint: resolveEndpoint({ agentSocket: agent.socket }),
    hello: () => ({ min_version: 1, max_version: 1, role: 'worker', app_name: APP, app_version: 'mgmt-v2', language: 'node' }),
  });
  await other.open();
  try {
    const latest = await DBOS.getLatestApplicationVersion();
    assert.equal(latest.versionName, 'mgmt-v2');
    assert.equal(typeof latest.versionId, 'string');
    assert.ok(latest.createdAt > 0 && latest.versionTimestamp > 0);
    assert.deepEqual(
      (await DBOS.listApplicationVersions()).map((v) => v.versionName),
      ['mgmt-v2', mine],
    );
    await DBOS.setLatestApplicationVersion(mine);
    assert.equal((await DBOS.getLatestApplicationVersion()).versionName, mine);
  } finally {
    other.close();
  }
});
