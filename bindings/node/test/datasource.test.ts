/**
 * Data sources (`dbos-agent/datasource`): transactions on the application's
 * own database, with a data source written as DBOS TypeScript 5.3 asks
 * (test/apps/pg_datasource.ts, on `pg`). The system database is the agent's;
 * the application database is another, fresh one. What is checked: a
 * transaction is a step of its workflow, recorded and replayed; its
 * checkpoint commits with its effects and is deleted when the workflow
 * ends; a worker SIGKILLed between the commit and the step's record is
 * succeeded by one that does not run the transaction again; a run that lost
 * its workflow rolls back; a rewind deletes the checkpoints from its step.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Client } from 'pg';
import { DBOS, DBOSWorkflowConflictError } from '../src';
import * as ours from '../src/datasource';
import { Agent, createDatabase, databaseUrl, dropDatabase, freshAgent } from './harness';
import { Proc } from './apps/proc';
import { PgDataSource } from './apps/pg_datasource';

const APP_DB = databaseUrl('node_datasource_app');
let agent: Agent;
let appDb: Client;
let sysDb: Client;
const ds = new PgDataSource('ledger-db', APP_DB);
const procs: Proc[] = [];
const seen: Array<Record<string, unknown>> = [];
let bodyRuns = 0;

const appendLedger = ds.registerTransaction(
  async (amount: number) => {
    bodyRuns++;
    seen.push({
      inTransaction: DBOS.isInTransaction(),
      inStep: DBOS.isInStep(),
      inWorkflow: DBOS.isInWorkflow(),
      stepID: DBOS.stepID,
      workflowID: DBOS.workflowID,
    });
    await PgDataSource.client.query('INSERT INTO ledger (workflow_id, amount) VALUES ($1, $2)', [DBOS.workflowID ?? 'none', amount]);
    return { amount, at: new Date(Date.UTC(2026, 11, 3)) };
  },
  { name: 'appendLedger' },
);

class Ledger {
  @ds.transaction({ readOnly: true })
  static async total(workflowID: string): Promise<number> {
    const r = await PgDataSource.client.query('SELECT coalesce(sum(amount), 0)::int AS total FROM ledger WHERE workflow_id = $1', [workflowID]);
    return r.rows[0].total as number;
  }
}

const ledgerWorkflow = DBOS.registerWorkflow(
  async (a: number, b: number) => {
    const first = await appendLedger(a);
    const viaRun = await ds.runTransaction(
      async () => {
        await PgDataSource.client.query('INSERT INTO ledger (workflow_id, amount) VALUES ($1, $2)', [DBOS.workflowID, b]);
        return 'second';
      },
      { name: 'second' },
    );
    const total = await Ledger.total(DBOS.workflowID!);
    return { first, viaRun, total };
  },
  { name: 'ledgerWorkflow' },
);

const waitingWorkflow = DBOS.registerWorkflow(
  async () => {
    await appendLedger(1);
    await appendLedger(2);
    await DBOS.recv('go', 60);
    return 'went';
  },
  { name: 'waitingWorkflow' },
);

before(async () => {
  await createDatabase(APP_DB);
  appDb = new Client(APP_DB);
  await appDb.connect();
  await appDb.query('CREATE TABLE ledger (id serial PRIMARY KEY, workflow_id text NOT NULL, amount int NOT NULL)');
  agent = await freshAgent('datasource');
  sysDb = new Client(agent.databaseUrl);
  await sysDb.connect();
  DBOS.setConfig(agent.config('datasource-app'));
  await DBOS.launch();
});

after(async () => {
  for (const p of procs) await p.kill();
  await DBOS.shutdown();
  await appDb?.end();
  await sysDb?.end();
  await agent?.cleanup();
  await dropDatabase(APP_DB);
});

async function ledgerRows(workflowID: string): Promise<number[]> {
  return (await appDb.query('SELECT amount FROM ledger WHERE workflow_id = $1 ORDER BY id', [workflowID])).rows.map((r) => r.amount as number);
}

async function checkpoints(workflowID: string): Promise<number[]> {
  const r = await appDb.query('SELECT function_num FROM dbos.transaction_completion WHERE workflow_id = $1 ORDER BY function_num', [workflowID]);
  return r.rows.map((x) => x.function_num as number);
}

test('every export of the official @dbos-inc/dbos-sdk/datasource is exported', () => {
  const official = require('@dbos-inc/dbos-sdk/datasource') as Record<string, unknown>;
  const missing = Object.keys(official).filter((k) => !(k in ours));
  assert.deepEqual(missing, []);
  assert.equal(ours.DATASOURCE_MIGRATIONS_TABLE, official.DATASOURCE_MIGRATIONS_TABLE);
  assert.deepEqual(ours.PGIsolationLevel, official.PGIsolationLevel);
  assert.deepEqual(ours.getDataSourceMigrationsPG('app'), (official.getDataSourceMigrationsPG as (s: string) => string[])('app'));
});

test('the data source schema is migrated at launch, with its version recorded', async () => {
  const r = await appDb.query(`SELECT version FROM dbos.${ours.DATASOURCE_MIGRATIONS_TABLE}`);
  assert.deepEqual(r.rows, [{ version: '1' }]);
  const cols = await appDb.query(
    `SELECT column_name FROM information_schema.columns WHERE table_schema = 'dbos' AND table_name = 'transaction_completion' ORDER BY ordinal_position`,
  );
  assert.deepEqual(
    cols.rows.map((c) => c.column_name),
    ['workflow_id', 'function_num', 'output', 'error', 'created_at'],
  );
});

test('transactions are steps of their workflow: recorded in order, context set, checkpoints deleted at the end', async () => {
  seen.length = 0;
  const h = await DBOS.startWorkflow(ledgerWorkflow, { workflowID: 'ds-basic' })(5, 6);
  const result = await h.getResult();
  assert.deepEqual(result, { first: { amount: 5, at: new Date(Date.UTC(2026, 11, 3)) }, viaRun: 'second', total: 11 });
  assert.deepEqual(seen, [{ inTransaction: true, inStep: false, inWorkflow: false, stepID: 0, workflowID: 'ds-basic' }]);
  const steps = (await DBOS.listWorkflowSteps('ds-basic'))!;
  assert.deepEqual(
    steps.map((s) => [s.functionID, s.name]),
    [
      [0, 'appendLedger'],
      [1, 'second'],
      [2, 'total'],
    ],
  );
  assert.deepEqual(await ledgerRows('ds-basic'), [5, 6]);
  // The workflow's end deleted its checkpoints (its step records cover them).
  assert.deepEqual(await checkpoints('ds-basic'), []);
  assert.deepEqual(ds.handler.deletes.filter(([w]) => w === 'ds-basic'), [['ds-basic', 0]]);
});

test('a transaction outside a workflow runs plainly: in a transaction, step 0, no workflow, no checkpoint', async () => {
  seen.length = 0;
  const before = await appDb.query(`SELECT count(*)::int AS n FROM dbos.transaction_completion`);
  const r = await appendLedger(3);
  assert.equal(r.amount, 3);
  assert.deepEqual(seen, [{ inTransaction: true, inStep: false, inWorkflow: false, stepID: 0, workflowID: undefined }]);
  assert.deepEqual(await ledgerRows('none'), [3]);
  const afterCount = await appDb.query(`SELECT count(*)::int AS n FROM dbos.transaction_completion`);
  assert.equal(afterCount.rows[0].n, before.rows[0].n);
});

test('a transaction is refused inside a step', async () => {
  const wf = DBOS.registerWorkflow(async () => DBOS.runStep(() => appendLedger(1), { name: 'outer' }), { name: 'txInStep' });
  await assert.rejects(DBOS.startWorkflow(wf)().then((h) => h.getResult()), /from within a `step` or `transaction`/);
});

test('a replayed workflow takes its transactions from the history and runs none again', async () => {
  await DBOS.startWorkflow(ledgerWorkflow, { workflowID: 'ds-replay' })(1, 2).then((h) => h.getResult());
  const runs = bodyRuns;
  // A fork from the last step replays the transactions before it.
  const fork = await DBOS.forkWorkflow<{ total: number }>('ds-replay', 2, { newWorkflowID: 'ds-replay-fork' });
  assert.equal((await fork.getResult()).total, 0, "the fork's read-only total runs under its own id, which has no rows");
  assert.equal(bodyRuns, runs, 'no transaction body ran again');
  assert.deepEqual(await ledgerRows('ds-replay'), [1, 2]);
  assert.deepEqual(await ledgerRows('ds-replay-fork'), []);
});

test('a run that lost its workflow rolls its transaction back and stops', async () => {
  // While the transaction is open, another run takes the workflow over: the
  // owner check passes before, fails after, and the handler rolls back.
  ds.handler.beforeCommit = async (workflowID) => {
    if (workflowID !== 'ds-fenced') return;
    await ours.assertStillOwnsWorkflow('ds-fenced');
    await sysDb.query(`UPDATE dbos.workflow_status SET owner_xid = 'someone-else' WHERE workflow_uuid = 'ds-fenced'`);
    await ours.assertStillOwnsWorkflow('ds-fenced');
  };
  let caught!: (e: unknown) => void;
  const thrown = new Promise<unknown>((res) => (caught = res));
  const wf = DBOS.registerWorkflow(
    async () => {
      try {
        await ds.runTransaction(
          async () => {
            await PgDataSource.client.query(`INSERT INTO ledger (workflow_id, amount) VALUES ('ds-fenced', 99)`);
          },
          { name: 'fencedTx' },
        );
      } catch (err) {
        caught(err);
        // The run has stopped: what it does now is not recorded.
        await DBOS.runStep(async () => 'after', { name: 'after' }).catch(() => undefined);
        return 'unrecorded';
      }
      caught(undefined);
      return 'committed';
    },
    { name: 'fencedWorkflow' },
  );
  try {
    await DBOS.startWorkflow(wf, { workflowID: 'ds-fenced' })();
    assert.ok((await thrown) instanceof DBOSWorkflowConflictError);
    assert.deepEqual(await ledgerRows('ds-fenced'), []);
    assert.deepEqual(await checkpoints('ds-fenced'), []);
    assert.deepEqual(await DBOS.listWorkflowSteps('ds-fenced'), [], 'nothing was recorded for the fenced step, nor after it');
    const row = await sysDb.query(`SELECT status, owner_xid FROM dbos.workflow_status WHERE workflow_uuid = 'ds-fenced'`);
    assert.deepEqual(row.rows, [{ status: 'PENDING', owner_xid: 'someone-else' }], 'the stale run wrote no outcome');
  } finally {
    ds.handler.beforeCommit = undefined;
    await DBOS.cancelWorkflow('ds-fenced');
  }
});

test('assertStillOwnsWorkflow passes for the run that owns the workflow, and outside it', async () => {
  await ours.assertStillOwnsWorkflow('not-this-run');
  const wf = DBOS.registerWorkflow(
    async () => {
      await ours.assertStillOwnsWorkflow(DBOS.workflowID!);
      return 'owned';
    },
    { name: 'ownerCheck' },
  );
  assert.equal(await DBOS.startWorkflow(wf)().then((h) => h.getResult()), 'owned');
});

test('a rewind deletes the checkpoints from its step on, then reruns the workflow from there', async () => {
  const h = await DBOS.startWorkflow(waitingWorkflow, { workflowID: 'ds-rewind' })();
  await eventuallyCheckpoints('ds-rewind', [0, 1]);
  await DBOS.cancelWorkflow('ds-rewind');
  await assert.rejects(h.getResult());
  // Cancelled mid-run: its checkpoints are still there.
  assert.deepEqual(await checkpoints('ds-rewind'), [0, 1]);
  ds.handler.deletes.length = 0;
  const rewound = await DBOS.rewindWorkflow<string>('ds-rewind', { startStep: 1 });
  assert.deepEqual(ds.handler.deletes[0], ['ds-rewind', 1]);
  await DBOS.send('ds-rewind', 'now', 'go');
  assert.equal(await rewound.getResult(), 'went');
  // Step 1's transaction ran again (its checkpoint was gone); step 0's did not.
  assert.deepEqual(await ledgerRows('ds-rewind'), [1, 2, 2]);
  assert.deepEqual(await checkpoints('ds-rewind'), []);
});

async function eventuallyCheckpoints(workflowID: string, want: number[]): Promise<void> {
  for (let i = 0; i < 1500; i++) {
    if (JSON.stringify(await checkpoints(workflowID)) === JSON.stringify(want)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`checkpoints of ${workflowID} never became ${want}`);
}

test('a worker SIGKILLed between its commit and the step record: the next one finishes the workflow without running the transaction again', async () => {
  await appDb.query(`DELETE FROM ledger WHERE workflow_id = 'ds-crash'`);
  const env = {
    DS_CONFIG: JSON.stringify(agent.config('datasource-crash-app')),
    DS_APP_DATABASE_URL: APP_DB,
    DS_WORKFLOW_ID: 'ds-crash',
  };
  const worker = join(__dirname, 'apps', 'datasource_worker.js');
  const first = Proc.node(worker, { ...env, DS_MODE: 'start', DS_CRASH_AFTER_COMMIT: '1' });
  procs.push(first);
  await first.waitFor(/^committed$/);
  await first.kill();
  // Committed in the application database, not recorded in the system database.
  assert.deepEqual(await ledgerRows('ds-crash'), [7]);
  assert.deepEqual(await checkpoints('ds-crash'), [0]);
  assert.deepEqual(await DBOS.listWorkflowSteps('ds-crash'), []);

  const second = Proc.node(worker, { ...env, DS_MODE: 'await' });
  procs.push(second);
  const m = await second.waitFor(/^result (.*)$/);
  await second.done();
  assert.deepEqual(JSON.parse(m[1]), { rows: 1, note: 'rows=1' });
  assert.deepEqual(await ledgerRows('ds-crash'), [7], 'the transaction ran once in all');
  const steps = (await DBOS.listWorkflowSteps('ds-crash'))!;
  assert.deepEqual(
    steps.map((s) => [s.functionID, s.name, s.output]),
    [
      [0, 'appendLedger', 1],
      [1, 'note', 'rows=1'],
    ],
  );
  assert.deepEqual(await checkpoints('ds-crash'), []);
});
