/**
 * A worker application for the crash tests (test/crash.test.ts), run as its
 * own process. Its workflow runs STEPS steps and a child workflow; each
 * step's body appends its name to CRASH_LOG when it begins, so the test
 * counts executions across processes, and the workflow prints `step <i>
 * done` once step i is recorded. With CRASH_HANG_AT=<step name>, that step's first
 * attempt in this process hangs (printing `hanging <name>`) until its run is
 * stopped, so the test kills at a known point without sleeping.
 *
 * CRASH_MODE=start launches, starts the workflow with id CRASH_WORKFLOW_ID
 * and prints `result <json>`; CRASH_MODE=await launches and awaits it (its
 * run reaches this worker as a recovery). Without CRASH_MODE (node --test
 * loads every file of build/test) it does nothing.
 */
import { appendFileSync } from 'node:fs';
import { DBOS } from '../../src';

const STEPS = 5;
const hangAt = process.env.CRASH_HANG_AT ?? '';
let hung = false;
// DBOS runs recovered workflows only once the application is initialized: a
// round trip in an initialize callback lets a run pushed at the hello arrive
// before it ends, and the workflow logs it if it started too early.
let initialized = false;
DBOS.registerLifecycleCallback({
  initialize: async () => {
    await DBOS.getWorkflowStatus('no-such-workflow');
    initialized = true;
  },
});

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function stepBody(name: string, value: number): Promise<number> {
  appendFileSync(process.env.CRASH_LOG!, `${name}\n`);
  if (name === hangAt && !hung) {
    hung = true;
    say(`hanging ${hangAt}`);
    const stop = DBOS.stepStatus!.cancelSignal!;
    await new Promise((_, reject) => stop.addEventListener('abort', () => reject(stop.reason), { once: true }));
  }
  return value;
}

const crashChild = DBOS.registerWorkflow(
  async (x: number) => {
    const v = await DBOS.runStep(() => stepBody('childStep', 100), { name: 'childStep' });
    return x + v;
  },
  { name: 'crashChild' },
);

export const crashWorkflow = DBOS.registerWorkflow(
  async (label: string) => {
    if (!initialized) appendFileSync(process.env.CRASH_LOG!, 'started-before-initialize\n');
    const parts: number[] = [];
    for (let i = 1; i <= STEPS; i++) {
      if (i === 4) parts.push(await crashChild(parts.length));
      parts.push(await DBOS.runStep(() => stepBody(`step${i}`, i * 10), { name: `step${i}` }));
      say(`step ${i} done`);
    }
    return `${label}:${parts.join(',')}`;
  },
  { name: 'crashWorkflow' },
);

async function main(): Promise<void> {
  const mode = process.env.CRASH_MODE;
  if (!mode) return;
  DBOS.setConfig(JSON.parse(process.env.CRASH_CONFIG!));
  await DBOS.launch();
  say('launched');
  const id = process.env.CRASH_WORKFLOW_ID!;
  const handle =
    mode === 'start'
      ? await DBOS.startWorkflow(crashWorkflow, { workflowID: id })(process.env.CRASH_LABEL ?? 'run')
      : DBOS.retrieveWorkflow<string>(id);
  say(`result ${JSON.stringify(await handle.getResult())}`);
  await DBOS.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
