// A worker whose workflows a test recovers after SIGKILL: a free workflow that
// takes DBOS.now() and DBOS.randomUUID() before it blocks, and a configured
// instance's workflow. BLOCK=1 makes the gate step wait for ever (the first
// worker, killed there); NONDET=1 runs another step first (a non-deterministic
// replay); START=<id> starts the workflow named by START_KIND under that id.
import { DBOS, ConfiguredInstance } from '../../src';
import { report, workerConfig } from './proc';

const block = process.env.BLOCK === '1';

const gate = DBOS.registerStep(
  async (id: string) => {
    if (block) {
      report('blocked', { workflowID: id });
      await new Promise(() => undefined);
    }
    return 'passed';
  },
  { name: 'gate' },
);
const other = DBOS.registerStep(async () => 'other', { name: 'otherStep' });

export const timeWorkflow = DBOS.registerWorkflow(
  async (label: string) => {
    if (process.env.NONDET === '1') await other();
    const now = await DBOS.now();
    const uuid = await DBOS.randomUUID();
    report('values', { workflowID: DBOS.workflowID, now, uuid });
    await gate(DBOS.workflowID!);
    return { label, now, uuid };
  },
  { name: 'timeWorkflow' },
);

@DBOS.className('Ledger')
export class LedgerAccount extends ConfiguredInstance {
  constructor(
    name: string,
    readonly currency: string,
  ) {
    super(name);
  }

  @DBOS.step()
  async tag(): Promise<string> {
    return `${this.name}/${this.currency}`;
  }

  @DBOS.workflow()
  async post(amount: number): Promise<string> {
    const tag = await this.tag();
    report('post', { workflowID: DBOS.workflowID, instance: this.name, currency: this.currency });
    await gate(DBOS.workflowID!);
    return `${tag}:${amount}`;
  }
}

const eur = new LedgerAccount('eur-book', 'EUR');
new LedgerAccount('usd-book', 'USD');

async function main(): Promise<void> {
  DBOS.setConfig(workerConfig() as never);
  await DBOS.launch();
  report('ready', { pid: process.pid, version: DBOS.applicationVersion });
  const id = process.env.START;
  if (id) {
    const h =
      process.env.START_KIND === 'instance'
        ? await DBOS.startWorkflow(eur, { workflowID: id }).post(5)
        : await DBOS.startWorkflow(timeWorkflow, { workflowID: id })('first');
    report('started', { workflowID: h.workflowID });
  }
}

// node --test runs every file of build/test: only a test's spawn starts this worker.
if (process.env.DBOS_TEST_CONFIG) main().catch((e) => {
  console.error(e);
  process.exit(1);
});
