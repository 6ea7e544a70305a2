/**
 * Crashes: a worker process SIGKILLed mid-workflow, and the agent itself
 * SIGKILLed while a worker runs. The workflow (test/apps/crash_worker.ts)
 * logs each step body's start to a file, so the counts say what ran where:
 * a step recorded before the crash never runs again, the step that was
 * running when it came runs again, and the workflow ends once with the
 * right result.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { Agent, freshAgent } from './harness';
import { Proc } from './apps/proc';

const WORKER = join(__dirname, 'apps', 'crash_worker.js');
const EXPECTED = (label: string) => `${label}:10,20,30,103,40,50`;
const dir = mkdtempSync(join(tmpdir(), 'dbos-node-crash-'));
const agents: Agent[] = [];
const procs: Proc[] = [];

after(async () => {
  for (const p of procs) await p.kill();
  for (const a of agents) await a.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

function worker(agent: Agent, mode: 'start' | 'await', workflowID: string, log: string, extra: Record<string, string> = {}): Proc {
  const p = Proc.node(WORKER, {
    CRASH_MODE: mode,
    CRASH_CONFIG: JSON.stringify(agent.config('crash-app')),
    CRASH_WORKFLOW_ID: workflowID,
    CRASH_LOG: log,
    ...extra,
  });
  procs.push(p);
  return p;
}

/** How many times each step body began, from the log. */
function counts(log: string): Record<string, number> {
  const c: Record<string, number> = {};
  for (const name of readFileSync(log, 'utf8').split('\n').filter(Boolean)) c[name] = (c[name] ?? 0) + 1;
  return c;
}

async function statusRow(agent: Agent, workflowID: string): Promise<{ status: string; recovery_attempts: string }> {
  const c = new Client(agent.databaseUrl);
  await c.connect();
  try {
    const r = await c.query('SELECT status, recovery_attempts FROM dbos.workflow_status WHERE workflow_uuid = $1', [workflowID]);
    assert.equal(r.rows.length, 1);
    return r.rows[0];
  } finally {
    await c.end();
  }
}

test('a worker SIGKILLed after step 2 is recorded: a second worker replays steps 1-2, reruns step 3 and finishes', async () => {
  const agent = await freshAgent('crash');
  agents.push(agent);
  const log = join(dir, 'worker.log');
  const a = worker(agent, 'start', 'crash-wf-1', log, { CRASH_HANG_AT: 'step3', CRASH_LABEL: 'one' });
  await a.waitFor(/^step 2 done$/);
  await a.waitFor(/^hanging step3$/);
  await a.kill();
  assert.deepEqual(counts(log), { step1: 1, step2: 1, step3: 1 });

  const b = worker(agent, 'await', 'crash-wf-1', log);
  const [, result] = await b.waitFor(/^result (.*)$/);
  await b.done();
  assert.equal(JSON.parse(result), EXPECTED('one'));
  assert.deepEqual(counts(log), { step1: 1, step2: 1, step3: 2, childStep: 1, step4: 1, step5: 1 });
  const row = await statusRow(agent, 'crash-wf-1');
  assert.equal(row.status, 'SUCCESS');
  // The second worker only replayed steps 1 and 2: no step of theirs was recorded twice.
  const c = new Client(agent.databaseUrl);
  await c.connect();
  try {
    const steps = await c.query(
      'SELECT function_name, count(*)::int AS n FROM dbos.operation_outputs WHERE workflow_uuid = $1 GROUP BY function_name ORDER BY function_name',
      ['crash-wf-1'],
    );
    assert.deepEqual(
      steps.rows.map((r: { function_name: string; n: number }) => `${r.function_name}=${r.n}`),
      ['DBOS.getResult=1', 'crashChild=1', 'step1=1', 'step2=1', 'step3=1', 'step4=1', 'step5=1'],
    );
  } finally {
    await c.end();
  }
});

test('a worker SIGKILLed inside a child workflow: the parent and the child both recover on a second worker', async () => {
  const agent = agents[0];
  const log = join(dir, 'child.log');
  const a = worker(agent, 'start', 'crash-wf-2', log, { CRASH_HANG_AT: 'childStep', CRASH_LABEL: 'two' });
  await a.waitFor(/^step 3 done$/);
  await a.waitFor(/^hanging childStep$/);
  await a.kill();

  const b = worker(agent, 'await', 'crash-wf-2', log);
  const [, result] = await b.waitFor(/^result (.*)$/);
  await b.done();
  assert.equal(JSON.parse(result), EXPECTED('two'));
  assert.deepEqual(counts(log), { step1: 1, step2: 1, step3: 1, childStep: 2, step4: 1, step5: 1 });
  assert.equal((await statusRow(agent, 'crash-wf-2')).status, 'SUCCESS');
  assert.equal((await statusRow(agent, 'crash-wf-2-3')).status, 'SUCCESS');
});

test('the agent SIGKILLed mid-workflow: the worker reconnects to the restarted agent and the workflow completes once', async () => {
  const agent = await freshAgent('crash_agent');
  agents.push(agent);
  const log = join(dir, 'agent.log');
  const w = worker(agent, 'start', 'crash-wf-3', log, { CRASH_HANG_AT: 'step3', CRASH_LABEL: 'three' });
  await w.waitFor(/^step 2 done$/);
  await w.waitFor(/^hanging step3$/);
  await agent.kill();
  await agent.start(); // the same socket and database

  const [, result] = await w.waitFor(/^result (.*)$/);
  await w.done();
  assert.equal(JSON.parse(result), EXPECTED('three'));
  assert.deepEqual(counts(log), { step1: 1, step2: 1, step3: 2, childStep: 1, step4: 1, step5: 1 });
  const row = await statusRow(agent, 'crash-wf-3');
  assert.equal(row.status, 'SUCCESS');
  assert.equal(Number(row.recovery_attempts), 2);
});
