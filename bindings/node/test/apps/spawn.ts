// A worker process of the core's tests: build/test/apps/<app>.js run by node,
// reaching the test's agent, reporting what it does as JSON lines on stdout.
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export interface WorkerEvent {
  event: string;
  [key: string]: unknown;
}

export class Worker {
  readonly events: WorkerEvent[] = [];
  readonly stderr: string[] = [];
  private readonly proc: ChildProcess;
  private readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];

  constructor(app: string, config: Record<string, unknown>, env: Record<string, string> = {}) {
    this.proc = spawn(process.execPath, [join(__dirname, `${app}.js`)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DBOS_TEST_CONFIG: JSON.stringify(config), ...env },
    });
    this.exited = new Promise((res) => this.proc.once('exit', (code) => res(code)));
    let buffered = '';
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.startsWith('{')) this.events.push(JSON.parse(line) as WorkerEvent);
        for (const w of this.waiters.splice(0)) w();
      }
    });
    this.proc.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    this.proc.once('exit', () => {
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** The first event matching, waiting for it (fails if the worker exits first). */
  async waitFor(match: (e: WorkerEvent) => boolean, timeoutMs = 30_000): Promise<WorkerEvent> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(match);
      if (found) return found;
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`worker exited (${this.proc.exitCode ?? this.proc.signalCode}) before the event:\n${this.stderr.join('')}`);
      }
      if (Date.now() > until) throw new Error(`no such worker event in time; saw ${JSON.stringify(this.events)}\n${this.stderr.join('')}`);
      await new Promise<void>((res) => {
        const t = setTimeout(res, Math.max(1, until - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          res();
        });
      });
    }
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }
}

/** In a worker: reports an event to the test. */
export function report(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/** In a worker: the DBOS config the test passed. */
export function workerConfig(): Record<string, unknown> {
  return JSON.parse(process.env.DBOS_TEST_CONFIG ?? '{}') as Record<string, unknown>;
}
