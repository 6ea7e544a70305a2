// The transports against the real agent: a `dbos-agent serve` started here,
// libdbos.so in embedded and connect modes, and the socket's trust check.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import {
  DBOSAgentForkedError,
  DBOSAgentUnavailableError,
  DBOSAgentUntrustedError,
  Endpoint,
  FrameStream,
  LibraryEndpoint,
  LibraryStream,
  SocketEndpoint,
  SocketStream,
  defaultSocketPath,
  peerCredentials,
  resolveEndpoint,
  resolveTrustedUids,
  trusts,
} from '../src/transport';
import { DBOSInitializationError } from '../src/error';
import { DBOS_ERR_FORKED, libraryError } from '../src/transport/library';

const repo = path.resolve(__dirname, '..', '..', '..', '..');
const agentBinary = process.env.DBOS_AGENT_BINARY || path.join(repo, 'bin', 'dbos-agent');
const libraryPath = process.env.DBOS_AGENT_LIBRARY || path.join(repo, 'cgo', 'libdbos.so');
const servedUrl =
  process.env.DBOS_TEST_DATABASE_URL || 'postgres://postgres:dbos@localhost:5432/h13tr_x?sslmode=disable';
// The embedded engine's own database: the served one's name with _lib.
const embeddedUrl = (() => {
  const u = new URL(servedUrl);
  u.pathname = `${u.pathname}_lib`;
  return u.toString();
})();

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'h13tr-'));
const extraDirs: string[] = [];

// ---- frames -----------------------------------------------------------

function frame(envelope: Record<string, unknown>): Uint8Array {
  const body = encode(envelope);
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length);
  out.set(body, 4);
  return out;
}

type Envelope = { kind: number; id: number; op?: string; body?: Record<string, unknown>; error?: unknown };

/** A started stream, its frames split and decoded as they come. */
class Session {
  private buf = Buffer.alloc(0);
  private readonly frames: Envelope[] = [];
  private readonly waiters: Array<{ resolve: (e: Envelope) => void; reject: (e: Error) => void }> = [];
  ended?: { err?: Error; at: number };
  readonly endedP: Promise<Error | undefined>;
  private markEnded!: (err?: Error) => void;

  constructor(readonly stream: FrameStream) {
    this.endedP = new Promise((resolve) => {
      this.markEnded = resolve;
    });
    stream.start(
      (chunk) => this.data(chunk),
      (err) => {
        assert.equal(this.ended, undefined, 'onEnd is called once');
        this.ended = { err, at: Date.now() };
        for (const w of this.waiters.splice(0)) w.reject(err ?? new Error('the stream ended'));
        this.markEnded(err);
      },
    );
  }

  private data(chunk: Uint8Array): void {
    assert.equal(this.ended, undefined, 'no data after onEnd');
    this.buf = Buffer.concat([this.buf, chunk]);
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (this.buf.length < 4 + n) break;
      const env = decode(this.buf.subarray(4, 4 + n)) as Envelope;
      this.buf = this.buf.subarray(4 + n);
      const w = this.waiters.shift();
      if (w) w.resolve(env);
      else this.frames.push(env);
    }
  }

  next(): Promise<Envelope> {
    const f = this.frames.shift();
    if (f) return Promise.resolve(f);
    if (this.ended) return Promise.reject(this.ended.err ?? new Error('the stream ended'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  async request(id: number, op: string, body: Record<string, unknown>): Promise<Envelope> {
    this.stream.write(frame({ kind: 1, id, op, body }));
    return this.next();
  }
}

/** Opens the endpoint, shakes hands as a client, pings: the session, open. */
async function helloPing(endpoint: Endpoint): Promise<Session> {
  const s = new Session(await endpoint.open());
  const hello = await s.request(1, 'hello', { min_version: 1 });
  assert.equal(hello.kind, 2);
  assert.equal(hello.id, 1);
  assert.equal(hello.error ?? null, null, JSON.stringify(hello.error));
  assert.equal(hello.body?.version, 1);
  const ping = await s.request(2, 'ping', {});
  assert.equal(ping.kind, 2);
  assert.equal(ping.id, 2);
  assert.equal(ping.error ?? null, null, JSON.stringify(ping.error));
  return s;
}

/**
 * Writes many pings at once, one write each, and a ping of 3 MiB among them
 * (a frame larger than a batch of the library's sends): every one is answered.
 */
async function manyPings(s: Session): Promise<void> {
  const ids: number[] = [];
  for (let id = 100; id < 2100; id++) {
    const body: Record<string, unknown> = id === 1000 ? { padding: 'x'.repeat(3 << 20) } : {};
    s.stream.write(frame({ kind: 1, id, op: 'ping', body }));
    ids.push(id);
  }
  const answered: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const reply = await s.next();
    assert.equal(reply.kind, 2);
    assert.equal(reply.error ?? null, null, JSON.stringify(reply.error));
    answered.push(reply.id);
  }
  assert.deepEqual(answered.sort((a, b) => a - b), ids);
}

async function closeSession(s: Session): Promise<void> {
  s.stream.close();
  assert.equal(await s.endedP, undefined, 'a stream ended by close() ends without an error');
}

// ---- the agent --------------------------------------------------------

interface Agent {
  child: ChildProcess;
  socket: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts `dbos-agent serve` on a socket in its own directory; resolves once it listens. */
async function startAgent(name: string, user?: { uid: number; gid: number }): Promise<Agent> {
  // Another user's agent cannot reach into this test's private directory:
  // its own goes beside it.
  const dir = user ? fs.mkdtempSync(path.join(os.tmpdir(), `h13tr-${name}-`)) : path.join(tmp, name);
  if (user) {
    extraDirs.push(dir);
    fs.chownSync(dir, user.uid, user.gid);
  } else {
    fs.mkdirSync(dir, { mode: 0o700 });
  }
  const socket = path.join(dir, 'agent.sock');
  const child = spawn(agentBinary, ['serve', '--database-url', servedUrl, '--socket', socket], {
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(user ?? {}),
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let log = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      log += d.toString();
      if (log.includes('"dbos-agent listening"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`dbos-agent exited (${code}) before listening:\n${log}`)));
  });
  return {
    child,
    socket,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

function dropDatabase(url: string): void {
  const u = new URL(url);
  const db = u.pathname.slice(1);
  u.pathname = '/postgres';
  execFileSync('psql', [u.toString(), '-qc', `DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' },
  });
}

let agent: Agent;

before(async () => {
  dropDatabase(servedUrl);
  dropDatabase(embeddedUrl);
  agent = await startAgent('served');
});

after(async () => {
  await agent?.stop();
  dropDatabase(servedUrl);
  dropDatabase(embeddedUrl);
  for (const dir of [tmp, ...extraDirs]) fs.rmSync(dir, { recursive: true, force: true });
});

// ---- the socket -------------------------------------------------------

describe('socket', () => {
  test('hello and ping over the agent socket', async () => {
    const ep = resolveEndpoint({ agentSocket: agent.socket }, {});
    assert.ok(ep instanceof SocketEndpoint);
    assert.equal(ep.describe(), `the dbos-agent at ${agent.socket}`);
    const s = await helloPing(ep);
    await manyPings(s);
    assert.equal((s.stream as SocketStream).queuedBytes(), 0);
    await closeSession(s);
  });

  test('DBOS_AGENT_SOCKET names the socket when the config does not', async () => {
    const ep = resolveEndpoint({}, { DBOS_AGENT_SOCKET: agent.socket });
    assert.equal(ep.describe(), `the dbos-agent at ${agent.socket}`);
    await closeSession(await helloPing(ep));
  });

  test('the peer credentials are the live agent process', async () => {
    const sock = net.createConnection({ path: agent.socket });
    await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    try {
      const fd = (sock as unknown as { _handle: { fd: number } })._handle.fd;
      const cred = peerCredentials(fd);
      assert.equal(cred.uid, process.getuid!());
      assert.equal(cred.gid, process.getgid!());
      assert.equal(cred.pid, agent.child.pid);
    } finally {
      sock.destroy();
    }
  });

  test('a missing socket is a clear unavailable error', async () => {
    const missing = path.join(tmp, 'nobody-here.sock');
    const ep = resolveEndpoint({ agentSocket: missing }, {});
    await assert.rejects(ep.open(), (e: Error) => {
      assert.ok(e instanceof DBOSAgentUnavailableError);
      assert.equal(e.name, 'DBOSAgentUnavailableError');
      assert.match(
        e.message,
        new RegExp(`^cannot reach the dbos-agent at ${missing}: No such file or directory \\(is \`dbos-agent serve\` running\\?`),
      );
      return true;
    });
  });

  test('a refused connection (the socket of a killed agent) is a clear unavailable error', async () => {
    const dead = await startAgent('killed');
    await dead.stop('SIGKILL');
    assert.ok(fs.existsSync(dead.socket), 'a killed agent leaves its socket');
    await assert.rejects(new SocketEndpoint(dead.socket).open(), (e: Error) => {
      assert.ok(e instanceof DBOSAgentUnavailableError);
      assert.match(e.message, /^cannot reach the dbos-agent at .*: Connection refused \(is `dbos-agent serve` running\?/);
      return true;
    });
  });

  test('the stream ends with an error when the agent goes away', async () => {
    const other = await startAgent('goes-away');
    const s = await helloPing(new SocketEndpoint(other.socket));
    const viaLibrary = await helloPing(new LibraryEndpoint(libraryPath, { mode: 'connect', socket: other.socket }));
    await other.stop();
    for (const session of [s, viaLibrary]) {
      const err = await session.endedP;
      assert.ok(err instanceof DBOSAgentUnavailableError, String(err));
    }
  });

  test('the default path is the one the agent computes', () => {
    // `serve --help` prints the agent's default socket for its environment.
    const agentDefault = (env: NodeJS.ProcessEnv): string => {
      const help = execFileSync(agentBinary, ['serve', '--help'], { env: { PATH: process.env.PATH, ...env } }).toString();
      const m = /Unix socket path \(env DBOS_AGENT_SOCKET; default ([^)]+)\)/.exec(help);
      assert.ok(m, help);
      return m[1];
    };
    const privateRun = fs.mkdtempSync(path.join(tmp, 'run-'));
    fs.chmodSync(privateRun, 0o700);
    const openRun = fs.mkdtempSync(path.join(tmp, 'open-'));
    fs.chmodSync(openRun, 0o777);
    const cases: NodeJS.ProcessEnv[] = [
      {},
      { XDG_RUNTIME_DIR: privateRun },
      { XDG_RUNTIME_DIR: openRun },
      { XDG_RUNTIME_DIR: path.join(tmp, 'absent') },
      { XDG_RUNTIME_DIR: openRun, TMPDIR: privateRun },
      { TMPDIR: `${privateRun}/` },
    ];
    for (const env of cases) {
      assert.equal(defaultSocketPath(env), agentDefault(env), JSON.stringify(env));
    }
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: privateRun }), path.join(privateRun, 'dbos-agent.sock'));
    assert.equal(defaultSocketPath({}), `/tmp/dbos-agent-${process.getuid!()}/agent.sock`);
  });
});

// ---- trust ------------------------------------------------------------

describe('trust', () => {
  test('the policy: own user, root and the trusted users', () => {
    const policy = { ownUid: 1000, trustedUids: new Set([1001]) };
    assert.equal(trusts(policy, 1000), true);
    assert.equal(trusts(policy, 0), true);
    assert.equal(trusts(policy, 1001), true);
    assert.equal(trusts(policy, 1002), false);
  });

  test('trusted uids from the config or DBOS_AGENT_TRUSTED_UIDS', () => {
    assert.deepEqual([...resolveTrustedUids(undefined, { DBOS_AGENT_TRUSTED_UIDS: '1001, 1002,' })], [1001, 1002]);
    assert.deepEqual([...resolveTrustedUids([7], { DBOS_AGENT_TRUSTED_UIDS: '1001' })], [7]);
    assert.deepEqual([...resolveTrustedUids(undefined, {})], []);
    assert.throws(() => resolveTrustedUids(undefined, { DBOS_AGENT_TRUSTED_UIDS: '1001,bob' }), DBOSInitializationError);
    assert.throws(() => resolveTrustedUids([-1], {}), DBOSInitializationError);
  });

  // A server of another user: as root, a real agent run as nobody; else
  // this user's agent with the policy pretending this process is another.
  const asRoot = process.getuid!() === 0;
  const other = { uid: 65534, gid: 65534 };

  test('a socket served by an untrusted user is refused before anything is sent', async () => {
    const served = asRoot ? await startAgent('untrusted', other) : agent;
    const serverUid = asRoot ? other.uid : process.getuid!();
    const ownUid = asRoot ? 0 : serverUid + 1;
    try {
      const refused = new SocketEndpoint(served.socket, { ownUid, trustedUids: new Set() });
      await assert.rejects(refused.open(), (e: Error) => {
        assert.ok(e instanceof DBOSAgentUntrustedError, String(e));
        assert.equal(e.name, 'DBOSAgentUntrustedError');
        assert.equal(e.uid, serverUid);
        assert.equal(e.path, served.socket);
        assert.ok(e.message.includes(served.socket), e.message);
        assert.ok(e.message.includes(`served by uid ${serverUid} (pid ${served.child.pid})`), e.message);
        return true;
      });
      // Trusted by name, the same socket opens.
      const trusted = new SocketEndpoint(served.socket, { ownUid, trustedUids: new Set([serverUid]) });
      (await trusted.open()).close();
      if (asRoot) {
        // The environment's trusted users, through resolveEndpoint.
        await assert.rejects(resolveEndpoint({ agentSocket: served.socket }, {}).open(), DBOSAgentUntrustedError);
        const ep = resolveEndpoint({ agentSocket: served.socket }, { DBOS_AGENT_TRUSTED_UIDS: String(other.uid) });
        (await ep.open()).close();
        // libdbos.so in connect mode checks the same, and says so in the same error.
        const lib = resolveEndpoint({ agentLibrary: libraryPath, agentMode: 'connect', agentSocket: served.socket }, {});
        await assert.rejects(lib.open(), (e: Error) => {
          assert.ok(e instanceof DBOSAgentUntrustedError, String(e));
          assert.equal(e.uid, other.uid);
          assert.ok(e.message.includes(`served by uid ${other.uid}`), e.message);
          return true;
        });
        const libTrusted = resolveEndpoint(
          { agentLibrary: libraryPath, agentMode: 'connect', agentSocket: served.socket, trustedUids: [other.uid] },
          {},
        );
        (await libTrusted.open()).close();
      }
    } finally {
      if (served !== agent) await served.stop();
    }
  });
});

// ---- libdbos.so -------------------------------------------------------

describe('library', () => {
  test('hello and ping through libdbos.so embedded, on its own database', async () => {
    const ep = resolveEndpoint({ agentLibrary: libraryPath, systemDatabaseUrl: embeddedUrl }, {});
    assert.ok(ep instanceof LibraryEndpoint);
    assert.equal(ep.mode, 'embedded');
    assert.equal(ep.describe(), 'the dbos-agent embedded in this process (libdbos.so)');
    const s = await helloPing(ep);
    await manyPings(s);
    assert.equal((s.stream as LibraryStream).queuedBytes(), 0);
    await closeSession(s);
  });

  test('hello and ping through libdbos.so connected to the served socket', async () => {
    const ep = resolveEndpoint({ agentLibrary: libraryPath, agentMode: 'connect', agentSocket: agent.socket }, {});
    assert.ok(ep instanceof LibraryEndpoint);
    assert.equal(ep.describe(), `the dbos-agent at ${agent.socket} (through libdbos.so)`);
    const s = await helloPing(ep);
    await manyPings(s);
    await closeSession(s);
  });

  test('hello and ping through libdbos.so with the agent in a sidecar process', async () => {
    const ep = resolveEndpoint(
      { agentLibrary: libraryPath, agentMode: 'sidecar', systemDatabaseUrl: embeddedUrl, executorID: 'sidecar-test' },
      { DBOS_AGENT_BINARY: agentBinary },
    );
    assert.ok(ep instanceof LibraryEndpoint);
    assert.equal(ep.config.agent_path, agentBinary);
    assert.equal(ep.describe(), 'the dbos-agent in a sidecar process of libdbos.so');
    const s = await helloPing(ep);
    await closeSession(s);
  });

  test('the event loop runs while dbos_recv waits, and dbos_close wakes it', async () => {
    const ep = new LibraryEndpoint(libraryPath, { mode: 'connect', socket: agent.socket }, { recvTimeoutMs: 60_000 });
    const s = await helloPing(ep);
    const stream = s.stream as LibraryStream;
    // The ping's reply came; the next receive now waits (up to 60 s).
    const calls = stream.recvCalls;
    assert.equal(stream.receivePending, true);
    let ticks = 0;
    const iv = setInterval(() => ticks++, 10);
    await new Promise((resolve) => setTimeout(resolve, 500));
    clearInterval(iv);
    assert.ok(ticks >= 25, `the loop ticked ${ticks} times in 500 ms`);
    assert.equal(stream.recvCalls, calls, 'one receive waited the whole time');
    assert.equal(stream.receivePending, true);
    const closedAt = Date.now();
    stream.close();
    assert.equal(await s.endedP, undefined);
    assert.equal(stream.receivePending, false);
    assert.ok(s.ended!.at - closedAt < 5_000, `the receive ended ${s.ended!.at - closedAt} ms after close`);
  });

  test("waiting receives leave libuv's thread pool to the host's fs calls", async () => {
    // As many sessions as the pool has threads, each receive waiting its
    // bounded time on one of them: an fs call still gets a thread.
    const threads = Number(process.env.UV_THREADPOOL_SIZE) || 4;
    const ep = resolveEndpoint({ agentLibrary: libraryPath, agentMode: 'connect', agentSocket: agent.socket }, {});
    const sessions = await Promise.all(Array.from({ length: threads }, () => helloPing(ep)));
    try {
      for (const s of sessions) assert.equal((s.stream as LibraryStream).receivePending, true);
      const started = Date.now();
      await fs.promises.readFile(__filename);
      const took = Date.now() - started;
      assert.ok(took < 2_000, `readFile waited ${took} ms for a thread`);
    } finally {
      await Promise.all(sessions.map(closeSession));
    }
  });

  test('two handles at once, then again: one library, loaded and opened twice', async () => {
    const ep = resolveEndpoint({ agentLibrary: libraryPath, systemDatabaseUrl: embeddedUrl }, {});
    for (let round = 0; round < 2; round++) {
      const [a, b] = await Promise.all([helloPing(ep), helloPing(ep)]);
      assert.notEqual((a.stream as LibraryStream).handle, (b.stream as LibraryStream).handle);
      await Promise.all([closeSession(a), closeSession(b)]);
    }
  });

  test('connect mode to a missing socket is a clear unavailable error', async () => {
    const missing = path.join(tmp, 'nobody-here.sock');
    const ep = resolveEndpoint({ agentLibrary: libraryPath, agentMode: 'connect', agentSocket: missing }, {});
    await assert.rejects(ep.open(), (e: Error) => {
      assert.ok(e instanceof DBOSAgentUnavailableError, String(e));
      assert.ok(e.message.startsWith(`cannot reach the dbos-agent at ${missing} (through libdbos.so): `), e.message);
      assert.ok(e.message.includes('(is `dbos-agent serve` running?'), e.message);
      return true;
    });
  });

  test('a config the library refuses is an initialization error with its message', async () => {
    const ep = new LibraryEndpoint(libraryPath, { mode: 'connect', socket: agent.socket, no_such_key: 1 });
    await assert.rejects(ep.open(), (e: Error) => {
      assert.ok(e instanceof DBOSInitializationError, String(e));
      assert.match(e.message, /^libdbos.so refused dbos_open: .*no_such_key/);
      return true;
    });
  });

  test('a forked child refused by the library is a clear forked error', () => {
    const e = libraryError(DBOS_ERR_FORKED, 'dbos_recv');
    assert.ok(e instanceof DBOSAgentForkedError);
    assert.ok(e instanceof DBOSAgentUnavailableError);
    assert.ok(e.message.includes(`this process (${process.pid}), a child forked`), e.message);
  });
});

// ---- the choice -------------------------------------------------------

describe('resolveEndpoint', () => {
  test('chooses the library by config or env, in the mode given', () => {
    const env = { DBOS_AGENT_LIBRARY: libraryPath, DBOS_SYSTEM_DATABASE_URL: 'postgresql+psycopg://u:p@h/db' };
    const embedded = resolveEndpoint({ executorID: 'e1', applicationVersion: 'v1' }, env) as LibraryEndpoint;
    assert.deepEqual(embedded.config, {
      mode: 'embedded',
      database_url: 'postgresql://u:p@h/db',
      executor_id: 'e1',
      application_version: 'v1',
    });
    const sidecar = resolveEndpoint({}, { ...env, DBOS_AGENT_MODE: 'sidecar', DBOS_AGENT_BINARY: '/x/dbos-agent' });
    assert.deepEqual((sidecar as LibraryEndpoint).config, {
      mode: 'sidecar',
      database_url: 'postgresql://u:p@h/db',
      agent_path: '/x/dbos-agent',
    });
    const connect = resolveEndpoint(
      { agentMode: 'connect', agentSocket: '/s.sock' },
      { ...env, DBOS_AGENT_TRUSTED_UIDS: '7,3' },
    ) as LibraryEndpoint;
    assert.deepEqual(connect.config, { mode: 'connect', socket: '/s.sock', trusted_uids: [3, 7] });
    assert.ok(resolveEndpoint({ agentMode: 'connect' }, {}) instanceof SocketEndpoint);
  });

  test('refuses a mode it does not know, and modes it cannot serve', () => {
    assert.throws(() => resolveEndpoint({ agentMode: 'remote' }, {}), DBOSInitializationError);
    assert.throws(() => resolveEndpoint({ agentMode: 'embedded' }, {}), /name it with agentLibrary/);
    assert.throws(() => resolveEndpoint({ agentLibrary: libraryPath }, {}), /set systemDatabaseUrl/);
  });
});
