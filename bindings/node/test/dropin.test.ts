/**
 * The drop-in claim, as a user would try it: one DBOS TypeScript
 * application (test/apps/dropin_app.ts, written against
 * `@dbos-inc/dbos-sdk` alone) is run as it is on the official SDK 5.3, on a
 * fresh database of its own, and again with only its import changed to
 * `dbos-agent`, through a fresh agent. Both copies are compiled the same
 * way (tsc, strict, from a project of their own whose node_modules holds
 * just the package they import: the official one installed here, and this
 * package as built for npm), run as real processes, and must print the same
 * lines.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { Client } from 'pg';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Proc } from './apps/proc';
import { Agent, LIBRARY, TRANSPORT, createDatabase, databaseUrl, dropDatabase, freshAgent } from './harness';

const PACKAGE_ROOT = resolve(__dirname, '..', '..');
const APP_SOURCE = join(PACKAGE_ROOT, 'test', 'apps', 'dropin_app.ts');
const OFFICIAL_IMPORT = "from '@dbos-inc/dbos-sdk';";
const BINDING_IMPORT = "from 'dbos-agent';";
const TSC = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let work: string;
let agent: Agent;
const officialDb = databaseUrl('node_dropin_official');
const appDb = databaseUrl('node_dropin_app');

before(async () => {
  // The binding as npm would ship it (dist/), which the derived copy imports.
  execFileSync(process.execPath, [join(PACKAGE_ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  work = mkdtempSync(join(tmpdir(), 'dbos-dropin-'));
  agent = await freshAgent('dropin');
  await dropDatabase(officialDb);
});

after(async () => {
  await agent?.cleanup();
  await dropDatabase(officialDb);
  await dropDatabase(appDb);
  if (work) rmSync(work, { recursive: true, force: true });
});

/**
 * A project holding the application's source and, in node_modules, the
 * packages it imports (each a link to a package directory, or a copy, for a
 * package whose own imports must resolve in this project); compiled with tsc.
 */
function project(name: string, source: string, modules: Record<string, { link: string } | { copy: string }>): string {
  const dir = join(work, name);
  for (const [pkg, how] of Object.entries(modules)) {
    const at = join(dir, 'node_modules', pkg);
    mkdirSync(dirname(at), { recursive: true });
    if ('link' in how) symlinkSync(how.link, at, 'dir');
    else cpSync(how.copy, at, { recursive: true, dereference: true });
  }
  writeFileSync(join(dir, 'app.ts'), source);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'commonjs',
        moduleResolution: 'node10',
        strict: true,
        experimentalDecorators: true,
        esModuleInterop: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(PACKAGE_ROOT, 'node_modules', '@types')],
        outDir: 'out',
      },
      files: ['app.ts'],
    }),
  );
  try {
    execFileSync(process.execPath, [TSC, '-p', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`tsc failed for the ${name} copy:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
  return join(dir, 'out', 'app.js');
}

/** The binding's transport for an application process, as the suite runs (socket, or libdbos.so in connect mode). */
function transportEnv(): Record<string, string> {
  if (TRANSPORT === 'library') return { DBOS_AGENT_LIBRARY: LIBRARY, DBOS_AGENT_MODE: 'connect', DBOS_AGENT_SOCKET: agent.socket };
  return { DBOS_AGENT_SOCKET: agent.socket };
}

const installed = (pkg: string): string => join(PACKAGE_ROOT, 'node_modules', pkg);

async function run(script: string, env: Record<string, string>): Promise<string[]> {
  const p = Proc.node(script, { DROPIN_RUN_ID: 'dropin', ...env }, { cwd: dirname(script) });
  await p.done(120_000);
  return p.lines;
}

test('a DBOS TypeScript application prints the same on the binding as on DBOS TypeScript, with only its import changed', async () => {
  const source = readFileSync(APP_SOURCE, 'utf8');
  assert.equal(source.split(OFFICIAL_IMPORT).length, 2, 'the application imports the official package exactly once');
  const derived = source.replace(OFFICIAL_IMPORT, BINDING_IMPORT);
  const changed = source.split('\n').filter((line, i) => line !== derived.split('\n')[i]);
  assert.equal(changed.length, 1, 'one line differs between the two copies');

  const official = project('official', source, { '@dbos-inc/dbos-sdk': { link: installed('@dbos-inc/dbos-sdk') } });
  const binding = project('binding', derived, { 'dbos-agent': { link: PACKAGE_ROOT } });

  const expected = await run(official, { DBOS_SYSTEM_DATABASE_URL: officialDb });
  const actual = await run(binding, { DBOS_SYSTEM_DATABASE_URL: agent.databaseUrl, ...transportEnv() });

  // The application prints a line per fact it checks; a run that stopped
  // early, or printed nothing, is not a match.
  assert.ok(expected.length > 60, `the official run printed ${expected.length} lines:\n${expected.join('\n')}`);
  assert.equal(expected.at(-1), 'reservations: 1');
  assert.deepEqual(actual, expected);
});

test("an application on DBOS's published Postgres data source runs on the binding, installed under the official package's name", async () => {
  // As `npm install @dbos-inc/dbos-sdk@npm:dbos-agent` lays it out: the data
  // source's own `require('@dbos-inc/dbos-sdk')` finds this package.
  const script = project('published-datasource', readFileSync(join(PACKAGE_ROOT, 'test', 'apps', 'published_ds_app.ts'), 'utf8'), {
    '@dbos-inc/dbos-sdk': { link: PACKAGE_ROOT },
    '@dbos-inc/postgres-datasource': { copy: installed('@dbos-inc/postgres-datasource') },
    postgres: { link: installed('postgres') },
    superjson: { link: installed('superjson') },
  });
  await createDatabase(appDb);
  const c = new Client(appDb);
  await c.connect();
  try {
    await c.query('CREATE TABLE items (sku text NOT NULL, qty int NOT NULL)');
  } finally {
    await c.end();
  }
  const lines = await run(script, { DBOS_SYSTEM_DATABASE_URL: agent.databaseUrl, APP_DATABASE_URL: appDb, ...transportEnv() });
  assert.deepEqual(lines, [
    'outside a workflow: {"rows":1,"inTransaction":true,"stepID":0}',
    'restock: {"added":[2,3],"stock":8,"label":"restocked 2 in restock-1"}',
    '  step 0 addItem: {"rows":2,"inTransaction":true,"stepID":0}',
    '  step 1 addItem: {"rows":3,"inTransaction":true,"stepID":1}',
    '  step 2 label: "restocked 2 in restock-1"',
    '  step 3 stock: 8',
    // That data source keeps its checkpoints (it has no deleteCheckpoints); read-only ones write none.
    'checkpoints: [0,1,2]',
    'again: {"added":[2,3],"stock":8,"label":"restocked 2 in restock-1"}',
    'stock: 8',
  ]);
});
