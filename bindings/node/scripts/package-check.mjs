// Checks the package as a user gets it: `npm pack` (which builds it through
// prepack), the tarball installed into an empty project, then
//   - `require('dbos-agent')` and `import { DBOS } from 'dbos-agent'` load
//     it, and give the same DBOS (one registry, one connection);
//   - TypeScript files using its types, one an ES module and one CommonJS,
//     compile with tsc (strict, module nodenext, so each resolves the
//     package through its own `exports` condition), and a wrong use of a
//     workflow's result type is a type error (the types are not `any`);
//   - the compiled ES module runs a workflow of two steps through a real
//     `dbos-agent serve` (bin/dbos-agent) on a database of its own: the
//     test database's name plus _node_package, dropped at the end; and so
//     does the README's first TypeScript block, compiled the same way.
// Run by scripts/node-test.sh; exits non-zero with what failed.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import pg from 'pg';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(root, '..', '..');
const agentBinary = process.env.DBOS_AGENT_BINARY ?? join(repo, 'bin', 'dbos-agent');
const baseURL = process.env.DBOS_TEST_DATABASE_URL ?? 'postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable';
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const work = mkdtempSync(join(tmpdir(), 'dbos-agent-pack-'));
const app = join(work, 'app');

function step(what) {
  console.log(`package-check: ${what}`);
}

function run(cmd, args, opts = {}) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  } catch (err) {
    throw new Error(`${[cmd, ...args].join(' ')} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

function databaseURL() {
  const u = new URL(baseURL);
  u.pathname = `/${u.pathname.slice(1)}_node_package`;
  return u.toString();
}

async function dropDatabase(url) {
  const u = new URL(url);
  const name = u.pathname.slice(1);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await c.end();
  }
}

/** Starts `dbos-agent serve` and resolves once it logs that it listens. */
function startAgent(url, socket) {
  const proc = spawn(agentBinary, ['serve', '--database-url', url, '--socket', socket, '--grace-period', '1s'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = [];
  const listening = new Promise((res, rej) => {
    let buffered = '';
    const onData = (chunk) => {
      buffered += chunk.toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        log.push(line);
        if (line.includes('dbos-agent listening')) res();
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.once('error', rej);
    proc.once('exit', (code) => rej(new Error(`dbos-agent exited (${code}) before listening:\n${log.join('\n')}`)));
  });
  const exited = new Promise((res) => proc.once('exit', res));
  return {
    listening,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await exited;
      }
    },
  };
}

const tsFiles = {
  // (main adds the README's example as readme.mts.)
  // An ES module (nodenext resolves the package's "import" condition).
  'app.mts': `import { DBOS, type WorkflowHandle, type WorkflowStatus } from 'dbos-agent';

const double = DBOS.registerStep(async (x: number): Promise<number> => x * 2, { name: 'double' });

const pipeline = DBOS.registerWorkflow(
  async (x: number): Promise<string> => {
    const a = await double(x);
    const b = await DBOS.runStep(async () => a + 1, { name: 'plusOne' });
    return \`\${x}:\${a}:\${b}\`;
  },
  { name: 'pipeline' },
);

class Shop {
  @DBOS.step({ retriesAllowed: true, maxAttempts: 2 })
  static async price(sku: string): Promise<number> {
    return sku.length;
  }

  @DBOS.workflow()
  static async quote(sku: string): Promise<number> {
    return Shop.price(sku);
  }
}

DBOS.setConfig({ name: 'package-check' });
await DBOS.launch();
const handle: WorkflowHandle<string> = await DBOS.startWorkflow(pipeline)(3);
const result: string = await handle.getResult();
const status: WorkflowStatus | null = await handle.getStatus();
// @ts-expect-error a workflow's result has its function's type, not any
const wrong: number = await handle.getResult();
void wrong;
const quoted: number = await Shop.quote('widget');
await DBOS.shutdown();
console.log(JSON.stringify({ result, status: status?.status, name: status?.workflowName, quoted }));
`,
  // CommonJS (nodenext resolves the package's "require" condition).
  'app.cts': `import { DBOS } from 'dbos-agent';
import type { StepConfig, WorkflowHandle } from 'dbos-agent';

const config: StepConfig = { retriesAllowed: true, intervalSeconds: 0.1 };
const wf = DBOS.registerWorkflow(async (n: number) => n + 1, { name: 'inc' });
export async function start(): Promise<WorkflowHandle<number>> {
  return DBOS.startWorkflow(wf)(1);
}
export { config };
`,
};

/** The README's first ```ts block: its example, which must compile and run as it is. */
function readmeExample() {
  const m = /```ts\n([\s\S]*?)```/.exec(readFileSync(join(root, 'README.md'), 'utf8'));
  assert.ok(m, 'README.md has no ```ts block');
  return m[1];
}

async function main() {
  tsFiles['readme.mts'] = readmeExample();
  step('npm pack (prepack builds dist/)');
  const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], { cwd: root }));
  const tarball = join(work, packed[0].filename);
  const files = packed[0].files.map((f) => f.path);
  for (const want of ['package.json', 'README.md', 'dist/cjs/index.js', 'dist/cjs/index.d.ts', 'dist/esm/index.js', 'dist/esm/index.d.ts', 'dist/esm/package.json']) {
    assert.ok(files.includes(want), `the tarball lacks ${want}`);
  }
  for (const f of files) {
    assert.ok(!/^(build|test|bench|node_modules)\//.test(f), `the tarball carries ${f}`);
  }

  step(`installing ${packed[0].filename} into an empty project`);
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'pack-check-app', private: true, version: '0.0.0' }, null, 2));
  const typesNode = JSON.parse(readFileSync(join(root, 'node_modules', '@types', 'node', 'package.json'), 'utf8')).version;
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, `@types/node@${typesNode}`], { cwd: app });
  const installed = JSON.parse(readFileSync(join(app, 'node_modules', 'dbos-agent', 'package.json'), 'utf8'));
  assert.equal(installed.version, JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version);

  step("require('dbos-agent') and import { DBOS } from 'dbos-agent'");
  writeFileSync(
    join(app, 'check.cjs'),
    `const m = require('dbos-agent');
if (typeof m.DBOS !== 'function' || typeof m.DBOS.registerWorkflow !== 'function') throw new Error('require gave no DBOS');
if (typeof m.ConfiguredInstance !== 'function') throw new Error('require gave no ConfiguredInstance');
// The library transport's FFI, installed without its install script (npm 11
// runs none unless allowed): its prebuilt binary must load as it is.
const koffi = require(require.resolve('koffi', { paths: [require('path').dirname(require.resolve('dbos-agent'))] }));
if (typeof koffi.load !== 'function') throw new Error('koffi did not load');
console.log('cjs ok');
`,
  );
  writeFileSync(
    join(app, 'check.mjs'),
    `import { createRequire } from 'node:module';
import { DBOS, ConfiguredInstance } from 'dbos-agent';
import pkg from 'dbos-agent';
const required = createRequire(import.meta.url)('dbos-agent');
if (typeof DBOS?.registerWorkflow !== 'function' || typeof ConfiguredInstance !== 'function') throw new Error('import gave no DBOS');
if (DBOS !== required.DBOS || pkg.DBOS !== DBOS) throw new Error('import and require load two copies of the package');
console.log('esm ok');
`,
  );
  assert.equal(run(process.execPath, ['check.cjs'], { cwd: app }).trim(), 'cjs ok');
  assert.equal(run(process.execPath, ['check.mjs'], { cwd: app }).trim(), 'esm ok');

  step('tsc (strict, nodenext) on an ES module and a CommonJS file typed against the installed package');
  for (const [name, text] of Object.entries(tsFiles)) writeFileSync(join(app, name), text);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          experimentalDecorators: true,
          types: ['node'],
          outDir: 'out',
        },
        files: Object.keys(tsFiles),
      },
      null,
      2,
    ),
  );
  run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app });

  step('the compiled ES module runs a workflow through a real agent');
  const url = databaseURL();
  await dropDatabase(url);
  const socket = join(work, 'agent.sock');
  const agent = startAgent(url, socket);
  try {
    await agent.listening;
    const out = run(process.execPath, [join('out', 'app.mjs')], {
      cwd: app,
      env: { ...process.env, DBOS_AGENT_SOCKET: socket, DBOS_AGENT_LIBRARY: '', DBOS_AGENT_MODE: '' },
    });
    const last = out.trim().split('\n').pop();
    assert.deepEqual(JSON.parse(last), { result: '3:6:7', status: 'SUCCESS', name: 'pipeline', quoted: 6 });
    step("the README's example runs");
    const readme = run(process.execPath, [join('out', 'readme.mjs')], {
      cwd: app,
      env: { ...process.env, DBOS_AGENT_SOCKET: socket, DBOS_AGENT_LIBRARY: '', DBOS_AGENT_MODE: '' },
    });
    assert.equal(readme.trim().split('\n').pop(), 'receipt-order-42');
  } finally {
    await agent.stop();
    await dropDatabase(url);
  }
  step('ok');
}

try {
  await main();
} catch (err) {
  console.error(`package-check: FAILED: ${err instanceof Error ? err.message : err}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
