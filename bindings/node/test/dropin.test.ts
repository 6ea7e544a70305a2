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
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Proc } from './apps/proc';
import { Agent, LIBRARY, TRANSPORT, databaseUrl, dropDatabase, freshAgent } from './harness';

const PACKAGE_ROOT = resolve(__dirname, '..', '..');
const APP_SOURCE = join(PACKAGE_ROOT, 'test', 'apps', 'dropin_app.ts');
const OFFICIAL_IMPORT = "from '@dbos-inc/dbos-sdk';";
const BINDING_IMPORT = "from 'dbos-agent';";
const TSC = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let work: string;
let agent: Agent;
const officialDb = databaseUrl('node_dropin_official');

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
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A project holding the application's source and, in node_modules, the one package it imports; compiled with tsc. */
function project(name: string, source: string, packageName: string, packageDir: string): string {
  const dir = join(work, name);
  const link = join(dir, 'node_modules', packageName);
  mkdirSync(dirname(link), { recursive: true });
  symlinkSync(packageDir, link, 'dir');
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

  const official = project('official', source, join('@dbos-inc', 'dbos-sdk'), join(PACKAGE_ROOT, 'node_modules', '@dbos-inc', 'dbos-sdk'));
  const binding = project('binding', derived, 'dbos-agent', PACKAGE_ROOT);

  const expected = await run(official, { DBOS_SYSTEM_DATABASE_URL: officialDb });
  const transport: Record<string, string> =
    TRANSPORT === 'library' ? { DBOS_AGENT_LIBRARY: LIBRARY, DBOS_AGENT_MODE: 'connect', DBOS_AGENT_SOCKET: agent.socket } : { DBOS_AGENT_SOCKET: agent.socket };
  const actual = await run(binding, { DBOS_SYSTEM_DATABASE_URL: agent.databaseUrl, ...transport });

  // The application prints a line per fact it checks; a run that stopped
  // early, or printed nothing, is not a match.
  assert.ok(expected.length > 60, `the official run printed ${expected.length} lines:\n${expected.join('\n')}`);
  assert.equal(expected.at(-1), 'reservations: 1');
  assert.deepEqual(actual, expected);
});
