// The Node benchmark (`make bench-node`, scripts/node-bench.sh): the 10-step
// workload (workflows of 10 steps, each returning a small value, as
// e2e/transports_bench_test.go runs it for Python) through every way a Node
// application reaches DBOS, in one run on the same Postgres:
//
//   - node/socket: this package over the agent's Unix socket, to a
//     `dbos-agent serve` of its own;
//   - node/lib-connect: the same package over libdbos.so in connect mode
//     (the library as the transport to a `dbos-agent serve` of its own);
//   - dbos-ts: the official DBOS TypeScript (@dbos-inc/dbos-sdk), in its
//     own process on its own system database: the same program with only
//     its import changed.
//
// Each variant has a system database of its own (DBOS_BENCH_DATABASE_URL's
// name plus _<variant>), created fresh and dropped at the end, and runs in a
// long-lived process (bench/runner.mjs) that launches once and then serves
// measurements, so the variants are interleaved: each round measures every
// variant at each concurrency, in an order rotated every round, so that a
// noisy machine biases them alike; the figures are the rounds' medians with
// their ranges. A measurement starts workflows for the duration after a
// warm-up and counts the steps of those that ended over the time until the
// last one ended. At the end every variant's database must hold each
// workflow it ran, SUCCESS, with its 10 steps.
//
// A library variant runs when the library exists and the runner really maps
// it (its /proc/<pid>/maps is checked); otherwise it is listed as not
// measured, with the reason, never replaced by another transport.
//
// Environment:
//   DBOS_BENCH_NODE_ROUNDS       rounds (default 3)
//   DBOS_BENCH_NODE_DURATION     seconds per measurement (default 5)
//   DBOS_BENCH_NODE_WARMUP       seconds of warm-up before each (default 1)
//   DBOS_BENCH_NODE_CONCURRENCY  workflows in flight (default 1,16,64)
//   DBOS_BENCH_NODE_VARIANTS     the variants to run (default all)
//   DBOS_BENCH_DATABASE_URL      the base database URL (default bench_node on localhost)
//   DBOS_BENCH_LIBRARY           libdbos.so (default cgo/libdbos.so)
//   DBOS_AGENT_BINARY            the agent (default bin/dbos-agent)
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const STEPS_PER_WORKFLOW = 10;
const CLOCK_TICKS = 100; // USER_HZ: /proc's CPU times are in these
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(root, '..', '..');

function envNumber(name, def) {
  const s = process.env[name];
  if (!s) return def;
  const n = Number(s);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}: ${JSON.stringify(s)} is not a positive number`);
  return n;
}

const cfg = {
  rounds: envNumber('DBOS_BENCH_NODE_ROUNDS', 3),
  duration: envNumber('DBOS_BENCH_NODE_DURATION', 5),
  warmup: envNumber('DBOS_BENCH_NODE_WARMUP', 1),
  concurrency: (process.env.DBOS_BENCH_NODE_CONCURRENCY || '1,16,64').split(',').map((s) => {
    const c = Number(s.trim());
    if (!Number.isInteger(c) || c < 1) throw new Error(`DBOS_BENCH_NODE_CONCURRENCY: ${JSON.stringify(s)} is not a positive integer`);
    return c;
  }),
  only: process.env.DBOS_BENCH_NODE_VARIANTS ? new Set(process.env.DBOS_BENCH_NODE_VARIANTS.split(',').map((s) => s.trim())) : undefined,
  baseURL: process.env.DBOS_BENCH_DATABASE_URL || 'postgres://postgres:dbos@localhost:5432/bench_node?sslmode=disable',
  library: resolve(process.env.DBOS_BENCH_LIBRARY || join(repo, 'cgo', 'libdbos.so')),
  agent: resolve(process.env.DBOS_AGENT_BINARY || join(repo, 'bin', 'dbos-agent')),
};

const REFERENCE = 'dbos-ts';
const variants = [
  { name: 'node/socket', sdk: 'dbos-agent', agent: true },
  { name: 'node/lib-connect', sdk: 'dbos-agent', agent: true, library: 'connect' },
  { name: REFERENCE, sdk: '@dbos-inc/dbos-sdk', agent: false },
]
  .filter((v) => !cfg.only || cfg.only.has(v.name))
  .map((v) => ({ ...v, results: new Map(), ran: 0, missing: undefined, failed: undefined }));

const work = mkdtempSync(join(tmpdir(), 'dbos-bench-node-'));
const cleanups = [];

// ---- databases

function adminURL() {
  const u = new URL(cfg.baseURL);
  u.pathname = '/postgres';
  return u.toString();
}

async function admin(sql) {
  const c = new pg.Client({ connectionString: adminURL() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** A fresh database beside the base URL's (its name plus suffix), dropped at the end. */
async function variantDatabase(suffix) {
  const u = new URL(cfg.baseURL);
  const name = `${u.pathname.slice(1)}_${suffix}`.replace(/[^a-zA-Z0-9_]/g, '_');
  await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin(`CREATE DATABASE "${name}"`);
  cleanups.push(() => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  u.pathname = `/${name}`;
  return u.toString();
}

// ---- processes

/** Lines of a child's output, with the last of them kept for error messages. */
function lines(stream, onLine) {
  createInterface({ input: stream }).on('line', onLine);
}

function tail(buf, line) {
  buf.push(line);
  if (buf.length > 50) buf.shift();
}

/** `dbos-agent serve` on a variant's database, as users run it; resolves once it listens. */
async function startAgent(databaseURL, name) {
  const socket = join(work, `${name.replace(/\W/g, '_')}.sock`);
  const proc = spawn(cfg.agent, ['serve', '--database-url', databaseURL, '--socket', socket, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = [];
  const exited = new Promise((res) => proc.once('exit', res));
  await new Promise((res, rej) => {
    const onLine = (line) => {
      tail(log, line);
      if (line.includes('dbos-agent listening')) res();
    };
    lines(proc.stdout, onLine);
    lines(proc.stderr, onLine);
    proc.once('error', rej);
    proc.once('exit', (code) => rej(new Error(`dbos-agent exited (${code}) before listening: ${log.join('\n')}`)));
  });
  cleanups.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      await exited;
    }
  });
  return { pid: proc.pid, socket };
}

class Runner {
  constructor(sdk, databaseURL, env) {
    this.proc = spawn(process.execPath, [join(root, 'bench', 'runner.mjs'), '--sdk', sdk, '--database-url', databaseURL], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.log = [];
    this.waiting = [];
    this.answers = [];
    this.exited = new Promise((res) => this.proc.once('exit', res));
    this.proc.once('exit', (code, signal) => {
      const err = new Error(`runner exited (${code ?? signal}): ${this.log.slice(-5).join('\n')}`);
      for (const w of this.waiting.splice(0)) w.reject(err);
      this.gone = err;
    });
    lines(this.proc.stdout, (line) => {
      if (line.startsWith('BENCH ')) {
        const a = JSON.parse(line.slice(6));
        const w = this.waiting.shift();
        if (w) w.resolve(a);
        else this.answers.push(a);
      } else {
        tail(this.log, line);
      }
    });
    lines(this.proc.stderr, (line) => tail(this.log, line));
  }

  answer() {
    if (this.answers.length) return Promise.resolve(this.answers.shift());
    if (this.gone) return Promise.reject(this.gone);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  async run(concurrency, seconds, latencies) {
    this.proc.stdin.write(`${JSON.stringify({ concurrency, seconds, latencies })}\n`);
    const a = await this.answer();
    if (a.error) throw new Error(a.error);
    return a;
  }

  async close() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.stdin.end(`${JSON.stringify({ quit: true })}\n`);
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 60_000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}

/** CPU time (s) a process used so far, from /proc/<pid>/stat (its own, not its children's). */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS; // utime, stime
}

function mapsFile(pid, path) {
  let real = path;
  try {
    real = realpathSync(path);
  } catch {
    /* the path as given */
  }
  try {
    return readFileSync(`/proc/${pid}/maps`, 'utf8').includes(real);
  } catch {
    return false;
  }
}

async function startVariant(v) {
  const db = await variantDatabase(v.name.replace(/^node\//, ''));
  v.db = db;
  const env = { DBOS_AGENT_LIBRARY: '', DBOS_AGENT_MODE: '', DBOS_AGENT_SOCKET: '' };
  if (v.agent) {
    const agent = await startAgent(db, v.name);
    v.agentPid = agent.pid;
    env.DBOS_AGENT_SOCKET = agent.socket;
  }
  if (v.library) {
    Object.assign(env, { DBOS_AGENT_LIBRARY: cfg.library, DBOS_AGENT_MODE: v.library, DBOS_SYSTEM_DATABASE_URL: db });
  }
  const r = new Runner(v.sdk, db, env);
  cleanups.push(() => r.close());
  const ready = await r.answer();
  v.version = ready.version;
  if (v.library && !mapsFile(r.proc.pid, cfg.library)) {
    await r.close();
    throw new Error(`the binding ran without loading ${cfg.library} (no library transport in this build of dbos-agent)`);
  }
  v.runner = r;
}

// ---- measuring

async function measure(v, c) {
  const warm = await v.runner.run(c, cfg.warmup, false);
  v.ran += warm.workflows;
  const pids = { client: v.runner.proc.pid, agent: v.agentPid };
  const before = { client: cpuSeconds(pids.client), agent: pids.agent ? cpuSeconds(pids.agent) : 0 };
  const res = await v.runner.run(c, cfg.duration, c === 1);
  const after = { client: cpuSeconds(pids.client), agent: pids.agent ? cpuSeconds(pids.agent) : 0 };
  v.ran += res.workflows;
  const steps = res.workflows * STEPS_PER_WORKFLOW;
  if (steps === 0) throw new Error('no workflow ended');
  const m = {
    stepsPerSec: steps / res.elapsed_s,
    clientUs: ((after.client - before.client) / steps) * 1e6,
    agentUs: ((after.agent - before.agent) / steps) * 1e6,
  };
  if (res.step_us?.length) {
    const s = [...res.step_us].sort((a, b) => a - b);
    m.p50Ms = percentile(s, 0.5) / 1000;
    m.p99Ms = percentile(s, 0.99) / 1000;
  }
  return m;
}

function percentile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** Waits (briefly) until the variant's database holds every workflow it ran, SUCCESS, with their steps. */
async function checkDurable(v) {
  const c = new pg.Client({ connectionString: v.db });
  await c.connect();
  try {
    const until = Date.now() + 60_000;
    for (;;) {
      const { rows } = await c.query(
        `SELECT (SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS')::int AS workflows,
                (SELECT count(*) FROM dbos.operation_outputs)::int AS steps`,
      );
      const { workflows, steps } = rows[0];
      if (workflows === v.ran && steps === v.ran * STEPS_PER_WORKFLOW) {
        console.log(`  ${v.name.padEnd(18)} ${workflows} workflows SUCCESS and ${steps} steps recorded in its database, as it ran`);
        return;
      }
      if (workflows > v.ran || Date.now() > until) {
        throw new Error(`ran ${v.ran} workflows, but its database has ${workflows} SUCCESS and ${steps} steps`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await c.end();
  }
}

// ---- the report

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

function figure(xs, digits) {
  if (!xs.length) return '-';
  const f = (x) => x.toFixed(digits);
  if (xs.length === 1) return f(xs[0]);
  return `${f(median(xs))} [${f(Math.min(...xs))}-${f(Math.max(...xs))}]`;
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

function report() {
  const hasLatency = cfg.concurrency.includes(1);
  const header = ['variant', ...cfg.concurrency.map((c) => `c=${c}`), ...(hasLatency ? ['p50 ms', 'p99 ms'] : [])];
  const of = (v, c, key) => (v.results.get(c) ?? []).map((m) => m[key]).filter((x) => x !== undefined);
  const rows = variants.map((v) => {
    if (v.missing) return [v.name, ...header.slice(1).map(() => '-')];
    return [
      v.name,
      ...cfg.concurrency.map((c) => figure(of(v, c, 'stepsPerSec'), 0)),
      ...(hasLatency ? [figure(of(v, 1, 'p50Ms'), 2), figure(of(v, 1, 'p99Ms'), 2)] : []),
    ];
  });
  console.log(`\nsteps/s (median of ${cfg.rounds} round(s) [range]); step latency at c=1 in ms`);
  console.log(table(header, rows));

  const ref = variants.find((v) => v.name === REFERENCE && !v.missing);
  if (ref) {
    // Per round: the variant's figure over the reference's in the same round.
    const ratios = (v, c, key, invert) => {
      const mine = v.results.get(c) ?? [];
      const theirs = ref.results.get(c) ?? [];
      const out = [];
      for (let i = 0; i < Math.min(mine.length, theirs.length); i++) {
        const a = mine[i][key];
        const b = theirs[i][key];
        if (a !== undefined && b !== undefined) out.push(invert ? b / a : a / b);
      }
      return out;
    };
    console.log(`\nratio to ${REFERENCE} (per-round ratios: median [range]; above 1 is better: steps/s variant/${REFERENCE}, latency ${REFERENCE}/variant)`);
    console.log(
      table(
        header,
        variants
          .filter((v) => v !== ref && !v.missing)
          .map((v) => [
            v.name,
            ...cfg.concurrency.map((c) => figure(ratios(v, c, 'stepsPerSec', false), 2)),
            ...(hasLatency ? [figure(ratios(v, 1, 'p50Ms', true), 2), figure(ratios(v, 1, 'p99Ms', true), 2)] : []),
          ]),
      ),
    );
  }

  console.log(`\nCPU per step in µs (medians [range]): the client process, the agent process (${cpus().length} cores on this host)`);
  const cpuRows = [];
  for (const v of variants) {
    if (v.missing) continue;
    for (const c of cfg.concurrency) {
      if (!(v.results.get(c) ?? []).length) continue;
      cpuRows.push([v.name, String(c), figure(of(v, c, 'clientUs'), 0), v.agent ? figure(of(v, c, 'agentUs'), 0) : 'none']);
    }
  }
  console.log(table(['variant', 'c', 'client', 'agent'], cpuRows));

  const notes = variants.filter((v) => v.missing || v.failed);
  if (notes.length) {
    console.log('');
    for (const v of notes) console.log(`  ${v.name}: ${v.missing ? `not measured: ${v.missing}` : `stopped: ${v.failed}`}`);
  }
}

// ---- main

async function main() {
  let failures = 0;
  const la = () => loadavg().map((x) => x.toFixed(2)).join(' ');
  console.log(
    `bench-node: 10-step workflows, ${cfg.rounds} round(s), ${cfg.duration}s per measurement after a ${cfg.warmup}s warm-up, ` +
      `in flight ${cfg.concurrency.join(',')}; Node ${process.version}; load average ${la()}`,
  );
  for (const v of variants) {
    try {
      await startVariant(v);
      console.log(`  ${v.name.padEnd(18)} ${v.version}`);
    } catch (err) {
      v.missing = err.message;
      console.log(`  ${v.name.padEnd(18)} not measured: ${v.missing}`);
      if (!v.library) failures++;
    }
  }
  for (let round = 0; round < cfg.rounds; round++) {
    for (const c of cfg.concurrency) {
      for (let i = 0; i < variants.length; i++) {
        const v = variants[(i + round) % variants.length];
        if (!v.runner || v.missing || v.failed) continue;
        try {
          const m = await measure(v, c);
          if (!v.results.has(c)) v.results.set(c, []);
          v.results.get(c).push(m);
          console.log(`  round ${round + 1} c=${String(c).padEnd(3)} ${v.name.padEnd(18)} ${m.stepsPerSec.toFixed(0).padStart(8)} steps/s`);
        } catch (err) {
          v.failed = `round ${round + 1}, c=${c}: ${err.message}`;
          console.log(`  ${v.name} failed: ${v.failed}`);
          failures++;
        }
      }
    }
  }
  for (const v of variants) {
    if (!v.runner || v.missing) continue;
    try {
      await checkDurable(v);
    } catch (err) {
      console.log(`  ${v.name}: ${err.message}`);
      failures++;
    }
  }
  report();
  console.log(`\nbench-node: load average at the end ${la()}`);
  return failures;
}

let failures = 1;
try {
  failures = await main();
} catch (err) {
  console.error(`bench-node: ${err.stack ?? err}`);
} finally {
  for (const c of cleanups.reverse()) {
    try {
      await c();
    } catch (err) {
      console.error(`bench-node: cleanup: ${err.message}`);
    }
  }
  rmSync(work, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);
