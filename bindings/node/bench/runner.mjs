// One variant of the Node benchmark (bench/driver.mjs): the 10-step workload
// with either this package (`--sdk dbos-agent`, over whatever transport the
// environment selects: DBOS_AGENT_SOCKET, DBOS_AGENT_LIBRARY, DBOS_AGENT_MODE)
// or the official DBOS TypeScript (`--sdk @dbos-inc/dbos-sdk`, in this
// process on its own system database). The two share one API: only the
// import differs.
//
// The process launches once and then serves measurements, so the driver can
// interleave the variants without paying a launch per measurement. Each line
// on stdin is a JSON command; each answer is one stdout line starting with
// `BENCH ` (whatever else the SDKs print is ignored), as
// e2e/testdata/bench_runner.py answers for the Python variants:
//
//   {"concurrency": 16, "seconds": 3.0, "latencies": false}
//     -> BENCH {"elapsed_s": ..., "workflows": ..., "steps": ..., "step_us": [...]}
//   {"quit": true}
//     -> the process shuts DBOS down and exits
//
// `step_us` is every step call's duration (the call from inside the workflow
// to the step's return, which includes recording it), given when asked for.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const STEPS_PER_WORKFLOW = 10;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: { sdk: { type: 'string' }, 'database-url': { type: 'string' } },
});
if (args.sdk !== 'dbos-agent' && args.sdk !== '@dbos-inc/dbos-sdk') {
  console.error('runner: --sdk dbos-agent | @dbos-inc/dbos-sdk');
  process.exit(2);
}
// dbos-agent is this package, by its own name (its build in dist/).
const { DBOS } = await import(args.sdk);
const version = JSON.parse(
  readFileSync(args.sdk === 'dbos-agent' ? join(root, 'package.json') : join(root, 'node_modules', args.sdk, 'package.json'), 'utf8'),
).version;

let recording = false;
let stepUs = [];

const step = DBOS.registerStep(async (_i) => 'x', { name: 'step' });

const tenSteps = DBOS.registerWorkflow(
  async () => {
    if (recording) {
      const out = stepUs;
      for (let i = 0; i < STEPS_PER_WORKFLOW; i++) {
        const t0 = performance.now();
        await step(i);
        out.push((performance.now() - t0) * 1000);
      }
    } else {
      for (let i = 0; i < STEPS_PER_WORKFLOW; i++) await step(i);
    }
    return 'x';
  },
  { name: 'ten_steps' },
);

DBOS.setConfig({ name: 'bench', systemDatabaseUrl: args['database-url'], logLevel: 'warn' });
await DBOS.launch();

/**
 * Workflows with `concurrency` of them in flight (each an async loop calling
 * the workflow function as an application does), started until `seconds`
 * have passed: the seconds until the last one ended, and how many ran.
 */
async function run(concurrency, seconds) {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  let failed;
  const loop = async () => {
    let n = 0;
    while (performance.now() < deadline && failed === undefined) {
      try {
        if ((await tenSteps()) !== 'x') throw new Error('the workflow returned something else');
      } catch (err) {
        failed ??= err;
        break;
      }
      n++;
    }
    return n;
  };
  const counts = await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = (performance.now() - start) / 1000;
  if (failed !== undefined) throw failed;
  return { elapsed, workflows: counts.reduce((a, b) => a + b, 0) };
}

function answer(obj) {
  process.stdout.write(`BENCH ${JSON.stringify(obj)}\n`);
}

answer({ ready: true, version: `${args.sdk} ${version}` });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.quit) break;
  stepUs = [];
  recording = Boolean(cmd.latencies);
  let result;
  try {
    result = await run(Number(cmd.concurrency), Number(cmd.seconds));
  } finally {
    recording = false;
  }
  const out = { elapsed_s: result.elapsed, workflows: result.workflows, steps: result.workflows * STEPS_PER_WORKFLOW };
  if (cmd.latencies) out.step_us = stepUs;
  answer(out);
}
await DBOS.shutdown();
process.exit(0);
