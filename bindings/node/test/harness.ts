/**
 * Test harness: a real `dbos-agent serve` on a database of its own, its
 * socket in a private temporary directory. A test waits for the agent's
 * "listening" log line (no sleeps), and stops it (SIGTERM) or kills it
 * (SIGKILL) as a real operator or crash would.
 */
import { ChildProcess, spawn } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';

export const REPO = resolve(__dirname, '..', '..', '..', '..');
export const AGENT_BINARY = process.env.DBOS_AGENT_BINARY ?? join(REPO, 'bin', 'dbos-agent');
export const LIBRARY = process.env.DBOS_AGENT_TEST_LIBRARY ?? join(REPO, 'cgo', 'libdbos.so');
const BASE_URL = process.env.DBOS_TEST_DATABASE_URL ?? 'postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable';

/** The transport the suite runs over: the socket, or libdbos.so in connect mode (DBOS_AGENT_TEST_TRANSPORT=library). */
export const TRANSPORT = process.env.DBOS_AGENT_TEST_TRANSPORT === 'library' ? 'library' : 'socket';

/** A database URL of the test base with its name suffixed, e.g. `<base>_node_queues`. */
export function databaseUrl(suffix: string): string {
  const u = new URL(BASE_URL);
  u.pathname = `/${u.pathname.slice(1)}_${suffix}`;
  return u.toString();
}

/** Runs a statement about the database of url (given its quoted name) on the server's postgres database. */
async function onServer(url: string, statement: (quotedName: string) => string): Promise<void> {
  const u = new URL(url);
  const name = u.pathname.slice(1);
  u.pathname = '/postgres';
  const c = new Client(u.toString());
  await c.connect();
  try {
    await c.query(statement(`"${name}"`));
  } finally {
    await c.end();
  }
}

export async function dropDatabase(url: string): Promise<void> {
  await onServer(url, (db) => `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
}

/** Creates the database of url afresh (dropping one of that name first). */
export async function createDatabase(url: string): Promise<void> {
  await dropDatabase(url);
  await onServer(url, (db) => `CREATE DATABASE ${db}`);
}

export class Agent {
  readonly dir: string;
  readonly socket: string;
  private proc?: ChildProcess;
  private exited?: Promise<number | null>;
  readonly log: string[] = [];

  constructor(
    readonly databaseUrl: string,
    private readonly extraArgs: string[] = [],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'dbos-node-test-'));
    this.socket = join(this.dir, 'agent.sock');
  }

  /** Starts the agent and resolves once it listens. */
  async start(): Promise<void> {
    const proc = spawn(
      AGENT_BINARY,
      ['serve', '--database-url', this.databaseUrl, '--socket', this.socket, '--grace-period', '2s', ...this.extraArgs],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.proc = proc;
    this.exited = new Promise((res) => proc.once('exit', (code) => res(code)));
    await new Promise<void>((res, rej) => {
      let buffered = '';
      const onData = (chunk: Buffer) => {
        buffered += chunk.toString();
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          this.log.push(line);
          if (line.includes('dbos-agent listening')) res();
        }
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      proc.once('exit', (code) => rej(new Error(`dbos-agent exited (${code}) before listening:\n${this.log.join('\n')}`)));
    });
  }

  /** The config a test's DBOS.setConfig takes to reach this agent over the suite's transport. */
  config(name: string): Record<string, unknown> {
    if (TRANSPORT === 'library') return { name, agentSocket: this.socket, agentLibrary: LIBRARY, agentMode: 'connect' };
    return { name, agentSocket: this.socket };
  }

  async stop(): Promise<void> {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill('SIGTERM');
    await this.exited;
  }

  async kill(): Promise<void> {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  async cleanup(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts an agent on a fresh database named for the test file. */
export async function freshAgent(suffix: string, extraArgs: string[] = []): Promise<Agent> {
  const url = databaseUrl(`node_${suffix}`);
  await dropDatabase(url);
  const agent = new Agent(url, extraArgs);
  await agent.start();
  return agent;
}

/** Resolves when predicate holds, checking each time `changed` fires (or every 20 ms when it is a poll). */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Resolves with probe's first value other than undefined (false counts as
 * undefined), checked now and at each `event` of emitter: a test waits on the
 * signal its workflows give, never on a timer. Rejects naming `what` after
 * timeoutMs.
 */
export function whenSignalled<T>(emitter: EventEmitter, event: string, probe: () => T | undefined | false, what: string, timeoutMs = 30_000): Promise<T> {
  const first = probe();
  if (first !== undefined && first !== false) return Promise.resolve(first);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, check);
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    function check() {
      const v = probe();
      if (v === undefined || v === false) return;
      clearTimeout(timer);
      emitter.off(event, check);
      resolve(v);
    }
    emitter.on(event, check);
  });
}
