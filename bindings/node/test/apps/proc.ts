/**
 * A child process of a test (a worker application, the official SDK's
 * program, a Python script) whose output a test reads line by line: it
 * waits for a line it expects (no sleeps), or for a JSON event a worker
 * program reports with `report`, then kills the process or waits for it to
 * exit. Also the worker programs' side: `report` and `workerConfig`.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

/** What a worker program reports on stdout as one JSON line (`report`). */
export interface WorkerEvent {
  event: string;
  [key: string]: unknown;
}

export interface ProcOptions {
  cwd?: string;
  /** Pass the child's stderr through to the test's (else it is kept for the transcript). */
  inheritStderr?: boolean;
}

export class Proc {
  readonly lines: string[] = [];
  readonly stderr: string[] = [];
  /** The process's exit code (null when a signal ended it), once it has exited. */
  readonly exited: Promise<number | null>;
  private readonly proc: ChildProcess;
  private waiters: Array<() => void> = [];

  constructor(command: string, args: string[], env: Record<string, string | undefined>, options: ProcOptions = {}) {
    this.proc = spawn(command, args, {
      env: { ...process.env, ...env },
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', options.inheritStderr ? 'inherit' : 'pipe'],
    });
    this.exited = new Promise((res) =>
      this.proc.once('exit', (code) => {
        res(code);
        this.wake();
      }),
    );
    split(this.proc.stdout!, (line) => {
      this.lines.push(line);
      this.wake();
    });
    if (this.proc.stderr) split(this.proc.stderr, (line) => this.stderr.push(line));
  }

  /** A Node program (a compiled file of build/test/apps). */
  static node(script: string, env: Record<string, string | undefined>, options?: ProcOptions): Proc {
    return new Proc(process.execPath, [script], env, options);
  }

  /** The worker program build/test/apps/<app>.js, given config as `workerConfig()` reads it. */
  static worker(app: string, config: Record<string, unknown>, env: Record<string, string> = {}): Proc {
    return Proc.node(join(__dirname, `${app}.js`), { DBOS_TEST_CONFIG: JSON.stringify(config), ...env });
  }

  get pid(): number {
    return this.proc.pid!;
  }

  private get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** The first of the output (from its start) that found returns, waiting for it; fails when the process exits first. */
  private async first<T>(found: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const hit = found();
      if (hit !== undefined) return hit;
      if (!this.running) {
        throw new Error(`process exited (${this.proc.exitCode ?? this.proc.signalCode}) before printing ${what}:\n${this.transcript()}`);
      }
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no ${what} in time:\n${this.transcript()}`);
      await new Promise<void>((res) => {
        const t = setTimeout(res, left);
        this.waiters.push(() => {
          clearTimeout(t);
          res();
        });
      });
    }
  }

  /** The first line (from the start of the output) matching re; fails when the process exits without it. */
  waitFor(re: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    return this.first(() => {
      for (const l of this.lines) {
        const m = l.match(re);
        if (m) return m;
      }
      return undefined;
    }, `a line ${re}`, timeoutMs);
  }

  /** The events reported so far (the output's JSON lines). */
  get events(): WorkerEvent[] {
    const events: WorkerEvent[] = [];
    for (const l of this.lines) {
      if (!l.startsWith('{')) continue;
      try {
        events.push(JSON.parse(l) as WorkerEvent);
      } catch {
        // A log line that only looks like JSON.
      }
    }
    return events;
  }

  /** The first reported event matching, waiting for it; fails when the process exits without it. */
  waitForEvent(match: (e: WorkerEvent) => boolean, timeoutMs = 60_000): Promise<WorkerEvent> {
    return this.first(() => this.events.find(match), 'such an event', timeoutMs);
  }

  /** Waits for the process to exit; fails on a non-zero exit. */
  async done(timeoutMs = 60_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      this.exited,
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`process did not exit in time:\n${this.transcript()}`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (code !== 0) throw new Error(`process exited with ${code ?? this.proc.signalCode}:\n${this.transcript()}`);
  }

  /** Sends a signal (SIGKILL, as a crash, unless told) and resolves once the process is gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.running) return;
    this.proc.kill(signal);
    await this.exited;
  }

  transcript(): string {
    return `--- stdout\n${this.lines.join('\n')}\n--- stderr\n${this.stderr.join('\n')}`;
  }
}

function split(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      onLine(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  });
  stream.on('end', () => {
    if (buffered) onLine(buffered);
    buffered = '';
  });
}

/** In a worker program: reports an event to the test (one JSON line on stdout). */
export function report(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/** In a worker program: the DBOS config the test passed (`Proc.worker`). */
export function workerConfig(): Record<string, unknown> {
  return JSON.parse(process.env.DBOS_TEST_CONFIG ?? '{}') as Record<string, unknown>;
}
