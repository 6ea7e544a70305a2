/**
 * The wake time of a durable sleep, as DBOS TypeScript records and reads it:
 * the binding's hello asks for wake_time_format "epoch_ms", so the agent
 * records its sleeps (and its waits' deadlines) as integer epoch ms, which
 * the official SDK reads back with JSON.parse on recovery; and a sleep the
 * official SDK recorded (integer ms), or DBOS Python (float seconds), is
 * recovered by the binding sleeping only what is left of it. The rows are
 * read and written in Postgres directly, as the SDKs do.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import { DBOS } from '../src';
import { requireEngine } from '../src/dbos';
import { DBOSAwaitedWorkflowCancelledError } from '../src/error';
import { Agent, eventually, freshAgent } from './harness';

let agent: Agent;
let db: Client;

interface SleepRow {
  function_id: number;
  function_name: string;
  output: string;
  serialization: string;
  started_at_epoch_ms: string;
  completed_at_epoch_ms: string;
}

async function sleepRows(workflowID: string): Promise<SleepRow[]> {
  const r = await db.query(
    `SELECT function_id, function_name, output, serialization, started_at_epoch_ms, completed_at_epoch_ms
       FROM dbos.operation_outputs WHERE workflow_uuid = $1 AND function_name = 'DBOS.sleep' ORDER BY function_id`,
    [workflowID],
  );
  return r.rows as SleepRow[];
}

/** How DBOS TypeScript 5.3 reads a recorded wake time on recovery (#durableSleep): JSON.parse, as epoch ms. */
function officialWakeTime(output: string): number {
  return JSON.parse(output) as number;
}

/** Sleeps, then says when it woke (epoch ms). */
const sleeper = DBOS.registerWorkflow(async (ms: number) => DBOS.sleep(ms).then(() => Date.now()), { name: 'sleeper' });

const waiter = DBOS.registerWorkflow(async () => DBOS.recv<string>('never', 0.2), { name: 'waiter' });

before(async () => {
  agent = await freshAgent('wake_time');
  DBOS.setConfig(agent.config('wake-app') as never);
  await DBOS.launch();
  db = new Client(agent.databaseUrl);
  await db.connect();
});

after(async () => {
  await db?.end();
  await DBOS.shutdown();
  await agent.cleanup();
});

// Each test is bounded: a wake time misread (ms taken for seconds) would sleep for millennia.
const bounded = { timeout: 30_000 };

test('a sleep is recorded as integer epoch ms, completed at its wake time, as DBOS TypeScript records it', bounded, async () => {
  const started = Date.now();
  const h = await DBOS.startWorkflow(sleeper)(300);
  const finished = await h.getResult();
  assert.ok(finished >= started + 300);
  const [row] = await sleepRows(h.workflowID);
  assert.equal(row.function_id, 0);
  assert.equal(row.serialization, 'portable_json');
  assert.match(row.output, /^\d+$/, `an integer, not seconds: ${row.output}`);
  const wakeAt = officialWakeTime(row.output);
  // Read as the official SDK reads it, the wake time is the sleep's end: 300 ms after it began.
  assert.ok(wakeAt >= started + 300 - 50 && wakeAt <= finished + 50, `wake time ${wakeAt - started} ms after the start`);
  assert.equal(Number(row.completed_at_epoch_ms), wakeAt, 'completed at the wake deadline');
  assert.equal(Number(row.completed_at_epoch_ms) - Number(row.started_at_epoch_ms), 300, 'the span is the sleep');
});

test("a wait's deadline is recorded as integer epoch ms, an instant", bounded, async () => {
  const started = Date.now();
  const h = await DBOS.startWorkflow(waiter)();
  assert.equal(await h.getResult(), null);
  const [row] = await sleepRows(h.workflowID);
  assert.equal(row.function_id, 1, 'the recv at 0, its deadline at 1');
  assert.match(row.output, /^\d+$/);
  const deadline = officialWakeTime(row.output);
  assert.ok(deadline >= started + 200 - 50 && deadline <= Date.now() + 50, `deadline ${deadline - started} ms after the start`);
  assert.equal(row.completed_at_epoch_ms, row.started_at_epoch_ms);
  assert.equal(Number(row.started_at_epoch_ms) + 200, deadline);
});

// A run of a long sleep is cancelled; its recorded wake time is replaced by one an SDK wrote (a
// sleep begun 500 ms ago that ends 1.5 s from now); the resumed run replays it and sleeps only
// what is left, not the hour it asked for.
for (const [sdk, shape] of [
  ['DBOS TypeScript (integer epoch ms)', (wakeMs: number) => String(wakeMs)],
  ['DBOS Python (float epoch seconds)', (wakeMs: number) => JSON.stringify(wakeMs / 1000 + 0.0004)],
] as const) {
  test(`a sleep recorded by ${sdk} is recovered sleeping only what is left`, bounded, async () => {
    const hour = 3_600_000;
    const h = await DBOS.startWorkflow(sleeper)(hour);
    await eventually(async () => ((await sleepRows(h.workflowID)).length ? true : undefined));
    const e = requireEngine();
    await e.request('cancel_workflow', { workflow_id: h.workflowID });
    await assert.rejects(DBOS.retrieveWorkflow(h.workflowID).getResult(), DBOSAwaitedWorkflowCancelledError);

    const began = Date.now() - 500;
    const wakeAt = began + 2000;
    const updated = await db.query(
      `UPDATE dbos.operation_outputs SET output = $2, serialization = 'portable_json',
              started_at_epoch_ms = $3, completed_at_epoch_ms = $4
        WHERE workflow_uuid = $1 AND function_id = 0 AND function_name = 'DBOS.sleep'`,
      [h.workflowID, shape(wakeAt), began, wakeAt],
    );
    assert.equal(updated.rowCount, 1);

    await e.request('resume_workflow', { workflow_id: h.workflowID });
    const woke = await DBOS.retrieveWorkflow<number>(h.workflowID).getResult();
    assert.ok(woke >= wakeAt - 50, `woke ${wakeAt - woke} ms before the wake time`);
    assert.ok(woke < wakeAt + 1000, `woke ${woke - wakeAt} ms after the wake time: the replay slept more than what was left`);
    const [row] = await sleepRows(h.workflowID);
    assert.equal(row.output, shape(wakeAt), 'the replay leaves the record as the SDK wrote it');
  });
}
