/**
 * A worker application for test/datasource.test.ts, run as its own process:
 * its workflow `ledgerWorkflow` runs a transaction of a Postgres data source
 * (test/apps/pg_datasource.ts) that appends a row to the application
 * database's `ledger`, then a step. With DS_MODE=start it starts the
 * workflow DS_WORKFLOW_ID; with DS_CRASH_AFTER_COMMIT set, the transaction
 * prints `committed` once its commit is done and then never returns, so the
 * test SIGKILLs the process between the commit and the step's record.
 * DS_MODE=await awaits the workflow (its run reaches this worker as a
 * recovery). It prints `result <json>`. Without DS_MODE (node --test loads
 * every file of build/test) it does nothing.
 */
import { DBOS } from '../../src';
import { PgDataSource } from './pg_datasource';

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

const mode = process.env.DS_MODE;
const ds = mode ? new PgDataSource('app', process.env.DS_APP_DATABASE_URL!) : undefined;
if (ds && process.env.DS_CRASH_AFTER_COMMIT) {
  ds.handler.crashAfterCommit = async () => {
    say('committed');
    await new Promise(() => undefined);
  };
}

const append = DBOS.registerWorkflow(
  async (amount: number) => {
    const rows = await ds!.runTransaction(
      async () => {
        await PgDataSource.client.query('INSERT INTO ledger (workflow_id, amount) VALUES ($1, $2)', [DBOS.workflowID, amount]);
        const r = await PgDataSource.client.query('SELECT count(*)::int AS n FROM ledger WHERE workflow_id = $1', [DBOS.workflowID]);
        return r.rows[0].n as number;
      },
      { name: 'appendLedger' },
    );
    const note = await DBOS.runStep(async () => `rows=${rows}`, { name: 'note' });
    return { rows, note };
  },
  { name: 'ledgerWorkflow' },
);

async function main(): Promise<void> {
  if (!mode) return;
  DBOS.setConfig(JSON.parse(process.env.DS_CONFIG!));
  await DBOS.launch();
  say('launched');
  const id = process.env.DS_WORKFLOW_ID!;
  const handle = mode === 'start' ? await DBOS.startWorkflow(append, { workflowID: id })(7) : DBOS.retrieveWorkflow(id);
  say(`result ${JSON.stringify(await handle.getResult())}`);
  await DBOS.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
