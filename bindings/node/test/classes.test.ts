// Classes against a real agent: workflows and steps on static methods and on
// configured instances, DBOS.className, startWorkflow on a class and on an
// instance, the rows compared with the official SDK's for the same code, and
// a configured instance's workflow recovered after its worker was SIGKILLed.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS, ConfiguredInstance } from '../src';
import { DBOSInvalidWorkflowTransitionError, DBOSNotRegisteredError } from '../src/error';
import { Agent, databaseUrl, dropDatabase, freshAgent } from './harness';
import { query, statusRow } from './apps/db';
import { Proc } from './apps/proc';
import { defineShapes, runShapes } from './apps/class-shapes';

let agent: Agent;
const shapes = defineShapes(DBOS, ConfiguredInstance);

before(async () => {
  agent = await freshAgent('classes');
  DBOS.setConfig(agent.config('classes-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

interface ShapeRow {
  workflow_uuid: string;
  name: string;
  class_name: string | null;
  config_name: string | null;
  inputs: string | null;
  output: string | null;
  status: string;
  serialization: string | null;
}
const SHAPE_ROWS = `SELECT ws.workflow_uuid, ws.name, ws.class_name, ws.config_name, ws.inputs, ws.status, ws.serialization,
                           COALESCE(wo.output, ws.output) AS output
                      FROM dbos.workflow_status ws LEFT JOIN dbos.workflow_output wo ON wo.workflow_uuid = ws.workflow_uuid
                     WHERE ws.workflow_uuid LIKE 'shape-%' ORDER BY ws.workflow_uuid`;
const SHAPE_STEPS = `SELECT workflow_uuid, function_id, function_name, output, child_workflow_id FROM dbos.operation_outputs
                      WHERE workflow_uuid LIKE 'shape-%' ORDER BY workflow_uuid, function_id`;

test('static and instance workflows and steps, DBOS.className: the rows are what DBOS TS writes for the same code', async () => {
  const ours = await runShapes(DBOS, shapes, 'shape');
  assert.deepEqual(ours, {
    static: 2,
    renamed: 4,
    instance: 'acct-one:6',
    direct: 'acct-one:7',
    renamedInstance: 'acct-two/5',
    staticDirect: 7,
    free: 7,
    freeWithClass: 8,
  });
  const officialUrl = databaseUrl('node_classes_official');
  await dropDatabase(officialUrl);
  const off = Proc.worker('official-classes', {}, { OFFICIAL_DATABASE_URL: officialUrl });
  try {
    const done = await off.waitForEvent((e) => e.event === 'results', 60_000);
    assert.deepEqual(done.results, ours);
  } finally {
    await off.kill();
  }
  const theirRows = await query<ShapeRow>(officialUrl, SHAPE_ROWS);
  const ourRows = await query<ShapeRow>(agent.databaseUrl, SHAPE_ROWS);
  assert.equal(ourRows.length, 8);
  assert.deepEqual(ourRows, theirRows);
  const byId = new Map(ourRows.map((r) => [r.workflow_uuid, r]));
  assert.deepEqual(
    ['shape-static', 'shape-renamed', 'shape-instance', 'shape-renamedInstance', 'shape-free', 'shape-freeWithClass'].map((id) => {
      const r = byId.get(id)!;
      return [r.name, r.class_name, r.config_name];
    }),
    [
      // DBOS TS stores no class or configuration name as NULL.
      ['wf', 'StaticOps', null],
      ['wf', 'RenamedOps', null],
      ['wf', 'Account', 'acct-one'],
      ['wf', 'RenamedAccount', 'acct-two'],
      ['freeShape', null, null],
      ['freeWithClass', 'GivenClass', null],
    ],
  );
  assert.deepEqual(await query(agent.databaseUrl, SHAPE_STEPS), await query(officialUrl, SHAPE_STEPS));
  await dropDatabase(officialUrl);
});

test('startWorkflow on a class or instance refuses what is not a registered workflow; a workflow method needs a ConfiguredInstance', async () => {
  assert.throws(() => (DBOS.startWorkflow(shapes.StaticOps) as unknown as { nope: () => unknown }).nope(), DBOSNotRegisteredError);
  const fake = { name: 'fake', wf: shapes.account.wf };
  await assert.rejects(
    (async () => (fake.wf as (x: number) => Promise<string>).call(fake, 1))(),
    DBOSInvalidWorkflowTransitionError,
  );
  const status = await DBOS.getWorkflowStatus('shape-instance');
  assert.equal(status?.workflowClassName, 'Account');
  assert.equal(status?.workflowConfigName, 'acct-one');
});

test("a configured instance's workflow, its worker SIGKILLed, is recovered on the same instance by the next worker", async () => {
  const config = agent.config('recovery-app');
  const id = `ledger-${Date.now()}`;
  const first = Proc.worker('recovery-worker', config, { BLOCK: '1', START: id, START_KIND: 'instance' });
  const ran = await first.waitForEvent((e) => e.event === 'post' && e.workflowID === id);
  assert.equal(ran.instance, 'eur-book');
  await first.waitForEvent((e) => e.event === 'blocked');
  await first.kill();
  const second = Proc.worker('recovery-worker', config, { BLOCK: '0' });
  try {
    const again = await second.waitForEvent((e) => e.event === 'post' && e.workflowID === id);
    assert.deepEqual([again.instance, again.currency], ['eur-book', 'EUR']);
    assert.equal(await DBOS.retrieveWorkflow(id).getResult(), 'eur-book/EUR:5');
  } finally {
    await second.kill();
  }
  const row = await statusRow(agent.databaseUrl, id);
  assert.equal(row?.class_name, 'Ledger');
  assert.equal(row?.config_name, 'eur-book');
  assert.ok(Number(row?.recovery_attempts) >= 2);
});
