/**
 * A worker process for comm.test.ts's crash test. Mode `start` starts the
 * workflow and waits (the test kills it while the workflow waits in
 * DBOS.recv); mode `recover` waits for the agent to hand it the workflow and
 * prints its result. Each step appends a line to COMM_WORKER_COUNT_FILE, so
 * the test counts how often each ran. Without COMM_WORKER_MODE (node --test
 * loading it as a file of the test folder) it does nothing.
 */
import { appendFileSync } from 'node:fs';
import { DBOS } from '../../src';

const beforeRecv = DBOS.registerStep(
  async () => {
    appendFileSync(process.env.COMM_WORKER_COUNT_FILE!, `before ${process.pid}\n`);
  },
  { name: 'beforeRecv' },
);

const afterRecv = DBOS.registerStep(
  async (got: string | null) => {
    appendFileSync(process.env.COMM_WORKER_COUNT_FILE!, `after ${process.pid}\n`);
    return `got:${got}`;
  },
  { name: 'afterRecv' },
);

const crashWorkflow = DBOS.registerWorkflow(
  async () => {
    await beforeRecv();
    await DBOS.setEvent('phase', 'receiving');
    const got = await DBOS.recv<string>('crash', 60);
    return afterRecv(got);
  },
  { name: 'crashWorkflow' },
);

async function main(mode: string): Promise<void> {
  DBOS.setConfig(JSON.parse(process.env.COMM_WORKER_CONFIG!));
  await DBOS.launch();
  const workflowID = process.env.COMM_WORKER_WORKFLOW_ID!;
  if (mode === 'start') {
    await DBOS.startWorkflow(crashWorkflow, { workflowID })();
    console.log(`started ${workflowID}`);
    return; // the test kills this process while the workflow waits
  }
  console.log('ready');
  const result = await DBOS.retrieveWorkflow<string>(workflowID).getResult();
  console.log(`done ${result}`);
  await DBOS.shutdown();
}

const mode = process.env.COMM_WORKER_MODE;
if (mode) {
  main(mode).catch((err) => {
    console.log(`failed ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
}
