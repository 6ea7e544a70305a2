/**
 * The drop-in promise, checked mechanically against the official package
 * (@dbos-inc/dbos-sdk 5.3, a devDependency): every name it exports, every
 * static member of its DBOS class, every method of its DBOSClient and every
 * class of its Error module is here too, and every exported type compiles
 * against this package. What is refused by design is named below, with the
 * reason the README gives.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as ours from '../src';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const official = require('@dbos-inc/dbos-sdk') as Record<string, unknown>;
const PACKAGE = resolve(__dirname, '..', '..');

/**
 * Members refused by design (the README's "What cannot work through an
 * agent"), and members not built yet (the README's list of what is not done).
 * A gap not named here fails the test, and so does a name here that is no
 * longer a gap, so the lists stay true.
 */
const REFUSED: Record<string, string> = {
  'DBOSClient.enqueueInTransaction': "joins the caller's own transaction on the system database, which the agent owns",
  'DBOSClient.enqueuePortableInTransaction': "joins the caller's own transaction on the system database, which the agent owns",
  'DBOSClient.sendInTransaction': "joins the caller's own transaction on the system database, which the agent owns",
};
const NOT_DONE: Record<string, string> = {};

function staticMembers(cls: unknown): string[] {
  return Object.getOwnPropertyNames(cls).filter((n) => !['length', 'name', 'prototype'].includes(n));
}

function missing(want: string[], have: Set<string>, scope: string): string[] {
  for (const n of want) {
    const k = `${scope}.${n}`;
    if (have.has(n) && (k in REFUSED || k in NOT_DONE)) assert.fail(`${k} is listed as a gap but is here: take it off the list`);
  }
  return want.filter((n) => !have.has(n) && !(`${scope}.${n}` in REFUSED) && !(`${scope}.${n}` in NOT_DONE)).map((n) => `${scope}.${n}`);
}

test('every value the official package exports is exported', () => {
  const gaps = missing(Object.keys(official), new Set(Object.keys(ours)), 'index');
  assert.deepEqual(gaps, []);
});

test("every static member of the official DBOS class is on this DBOS", () => {
  const theirs = staticMembers(official.DBOS);
  assert.ok(theirs.length > 80, `the official DBOS has ${theirs.length} static members`);
  const gaps = missing(theirs, new Set(staticMembers(ours.DBOS)), 'DBOS');
  assert.deepEqual(gaps, []);
});

test("every method of the official DBOSClient is on this DBOSClient", () => {
  const theirs = official.DBOSClient as { prototype: object };
  const mine = (ours as Record<string, unknown>).DBOSClient as { prototype: object } | undefined;
  assert.ok(mine, 'DBOSClient is exported');
  const want = [...staticMembers(theirs), ...Object.getOwnPropertyNames(theirs.prototype).filter((n) => n !== 'constructor')];
  const have = new Set([...staticMembers(mine), ...Object.getOwnPropertyNames(mine.prototype)]);
  assert.deepEqual(missing(want, have, 'DBOSClient'), []);
});

test('every class of the official Error module is in this one', () => {
  const theirs = Object.keys(official.Error as object);
  const gaps = missing(theirs, new Set(Object.keys(ours.Error)), 'Error');
  assert.deepEqual(gaps, []);
});

test('every type the official index exports compiles against this package', () => {
  // The official index's exported names, types included, read from its declarations.
  const index = readFileSync(join(PACKAGE, 'node_modules', '@dbos-inc', 'dbos-sdk', 'dist', 'src', 'index.d.ts'), 'utf8');
  const names = new Set<string>();
  for (const m of index.matchAll(/export (?:type )?\{([^}]*)\}/g)) {
    for (const part of m[1].split(',')) {
      const name = part.trim().split(/\s+as\s+/).pop()!.trim();
      if (name) names.add(name);
    }
  }
  assert.ok(names.size > 30, `read ${names.size} exported names`);
  const dir = mkdtempSync(join(tmpdir(), 'dbos-node-types-'));
  try {
    const wanted = [...names].filter((n) => !(`index.${n}` in REFUSED));
    // A type-only import of each name: it compiles only if this package exports it.
    writeFileSync(join(dir, 'types.ts'), `import type { ${wanted.join(', ')} } from ${JSON.stringify(join(PACKAGE, 'src'))};\nexport type { ${wanted.join(', ')} };\n`);
    const tsc = join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
    try {
      // The package's own compiler settings, for this one file.
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: join(PACKAGE, 'tsconfig.json'), compilerOptions: { noEmit: true, rootDir: '/' , typeRoots: [join(PACKAGE, 'node_modules', '@types')] }, include: [], files: [join(dir, 'types.ts')] }));
      execFileSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    } catch (err) {
      const out = (err as { stdout?: string }).stdout ?? String(err);
      assert.fail(`types missing from this package:\n${out}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
