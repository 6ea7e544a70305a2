import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS, DBOSClient, Debouncer, DebouncerClient, WorkflowQueue } from '../src';
import { requireEngine } from '../src/dbos';
import { serializeArgs } from '../src/serialization';
import { Agent, freshAgent } from './harness';

let agent: Agent;
const runs: Array<{ id: string; args: unknown[] }> = [];

const collect = DBOS.registerWorkflow(
  async (doc: string, edit: number) => {
    runs.push({ id: DBOS.workflowID!, args: [doc, edit] });
    return `${doc}@${edit}`;
  },
  { name: 'collect' },
);

new WorkflowQueue('debounced');

const debouncer = new Debouncer({ workflow: collect });

/** A workflow that debounces three edits of one document and returns the ids it was given. */
const editor = DBOS.registerWorkflow(
  async (doc: string) => {
    const d = new Debouncer({ workflow: collect, startWorkflowParams: { queueName: 'debounced' } });
    // Step 0 first: the agent refuses a caller's function_id 0 (DBOS TypeScript's first id).
    await DBOS.runStep(async () => doc, { name: 'open' });
    const ids: string[] = [];
    for (let edit = 1; edit <= 3; edit++) ids.push((await d.debounce(doc, 1000, doc, edit)).workflowID);
    return ids;
  },
  { name: 'editor' },
);

before(async () => {
  agent = await freshAgent('debouncer');
  DBOS.setConfig(agent.config('debouncer-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

test('several calls within the period collapse into one run with the last arguments', async () => {
  const h1 = await debouncer.debounce('doc-1', 1000, 'doc-1', 1);
  assert.equal((await h1.getStatus())?.status, 'DELAYED');
  const h2 = await debouncer.debounce('doc-1', 1000, 'doc-1', 2);
  const h3 = await debouncer.debounce('doc-1', 1000, 'doc-1', 3);
  assert.equal(h2.workflowID, h1.workflowID);
  assert.equal(h3.workflowID, h1.workflowID);
  // Another key is another workflow.
  const other = await debouncer.debounce('doc-2', 1000, 'doc-2', 9);
  assert.notEqual(other.workflowID, h1.workflowID);

  assert.equal(await h1.getResult(), 'doc-1@3');
  assert.equal(await other.getResult(), 'doc-2@9');
  assert.deepEqual(
    runs.filter((r) => r.id === h1.workflowID).map((r) => r.args),
    [['doc-1', 3]],
  );
  // Once it ran, the key is free: the next call starts a new workflow.
  const next = await debouncer.debounce('doc-1', 1000, 'doc-1', 4);
  assert.notEqual(next.workflowID, h1.workflowID);
  assert.equal(await next.getResult(), 'doc-1@4');
});

test('from workflow code the debounce is durable: one step per bounce, two for a creation', async () => {
  const h = await DBOS.startWorkflow(editor, { workflowID: 'editor-1' })('doc-3');
  const ids = await h.getResult();
  assert.equal(new Set(ids).size, 1, 'all three edits went to one workflow');
  assert.equal(ids[0], 'editor-1-2', "the created workflow is the caller's child at N+1");
  const child = DBOS.retrieveWorkflow<string>(ids[0]);
  assert.equal(await child.getResult(), 'doc-3@3');
  const childStatus = await child.getStatus();
  assert.equal(childStatus?.queueName, 'debounced');
  const steps = (await requireEngine().request('list_steps', { workflow_id: 'editor-1' })).steps as Array<{
    function_id: number;
    name: string;
    child_workflow_id?: string;
  }>;
  assert.deepEqual(
    steps.map((s) => [s.function_id, s.name, s.child_workflow_id ?? null]),
    [
      [0, 'open', null],
      [1, 'DBOS.debounceDelayedWorkflow', null],
      [2, 'collect', 'editor-1-2'],
      [3, 'DBOS.debounceDelayedWorkflow', null],
      [4, 'DBOS.debounceDelayedWorkflow', null],
    ],
  );
});

test("DBOS's refusals: a non-positive period, options a debounce owns", async () => {
  await assert.rejects(debouncer.debounce('k', 0, 'k', 1), /debouncePeriodMs must be positive, not 0/);
  const withDedup = new Debouncer({ workflow: collect, startWorkflowParams: { enqueueOptions: { deduplicationID: 'x' } } });
  await assert.rejects(withDedup.debounce('k', 100, 'k', 1), /Cannot debounce a workflow with a deduplicationID set/);
  const withPriority = new Debouncer({ workflow: collect, startWorkflowParams: { queueName: 'debounced', enqueueOptions: { priority: 1 } } });
  await assert.rejects(withPriority.debounce('k', 100, 'k', 1), /Cannot debounce a workflow with a priority set/);
});

test('a DebouncerClient names the workflow, through a DBOSClient', async () => {
  const client = await DBOSClient.create({ ...(agent.config('debouncer-app') as object), systemDatabaseUrl: agent.databaseUrl, applicationName: 'debouncer-app' });
  try {
    const dc = new DebouncerClient(client, { workflowName: 'collect', startWorkflowParams: { queueName: 'debounced' } });
    const a = await dc.debounce('doc-4', 1000, 'doc-4', 1);
    const b = await dc.debounce('doc-4', 1000, 'doc-4', 2);
    assert.equal(b.workflowID, a.workflowID);
    assert.equal(await a.getResult(), 'doc-4@2');
    const status = await client.getWorkflow(a.workflowID);
    assert.equal(status?.queueName, 'debounced');
    assert.equal(status?.applicationName, 'debouncer-app');
  } finally {
    await client.destroy();
  }
});

test("DBOSClient's debounce calls: enqueueDebounced creates, debounceDelayedWorkflow pushes it back", async () => {
  const client = await DBOSClient.create({ ...(agent.config('debouncer-app') as object), systemDatabaseUrl: agent.databaseUrl, applicationName: 'debouncer-app' });
  try {
    const dedup = '.collect-doc-5';
    const id = await client.enqueueDebounced(
      { queueName: 'debounced', workflowName: 'collect', deduplicationID: dedup, delaySeconds: 3600, workflowID: 'debounced-5' },
      undefined,
      ['doc-5', 1],
    );
    assert.equal(id, 'debounced-5');
    const held = await client.getWorkflow(id);
    assert.equal(held?.status, 'DELAYED');
    assert.equal(held?.deduplicationID, dedup);
    // A key nobody holds: nothing is pushed back.
    const free = await client.debounceDelayedWorkflow({
      workflowName: 'collect', workflowClassName: '', queueName: 'debounced', deduplicationID: '.collect-none',
      delayUntilEpochMS: Date.now(), input: null, serialization: null,
    });
    assert.equal(free.bouncedWorkflowID, null);
    assert.equal(free.holderWorkflowID, null);
    // The pending one is pushed back to now, with new arguments, and runs with them.
    const ser = await serializeArgs(['doc-5', 9], client.serializer);
    const bounced = await client.debounceDelayedWorkflow({
      workflowName: 'collect', workflowClassName: '', queueName: 'debounced', deduplicationID: dedup,
      delayUntilEpochMS: Date.now(), input: ser.value, serialization: ser.serialization,
    });
    assert.equal(bounced.bouncedWorkflowID, id);
    assert.equal(await client.retrieveWorkflow(id).getResult(), 'doc-5@9');
  } finally {
    await client.destroy();
  }
});
