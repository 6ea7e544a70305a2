/**
 * A child process of a test (a worker application, the official SDK's
 * program, a Python script) whose output a test reads line by line: it
 * waits for a line it expects (no sleeps), then kills the process or waits
 * for it to exit.
 */
import { ChildProcess, spawn } from 'node:child_process';

export class Proc {
  readonly lines: string[] = [];
  readonly stderr: string[] = [];
  private readonly proc: ChildProcess;
  private readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];

  constructor(command: string, args: string[], env: Record<string, string | undefined>, cwd?: string) {
    this.proc = spawn(command, args, { env: { ...process.env, ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
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
    split(this.proc.stderr!, (line) => this.stderr.push(line));
  }

  /** A Node program of build/test/apps (compiled from test/apps). */
  static node(script: string, env: Record<string, string | undefined>, cwd?: string): Proc {
    return new Proc(process.execPath, [script], env, cwd);
  }

  get pid(): number {
    return this.proc.pid!;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** The first line (from the start of the output) matching re; fails when the process exits without it. */
  async waitFor(re: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      for (const l of this.lines) {
        const m = l.match(re);
        if (m) return m;
      }
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`process exited (${this.proc.exitCode ?? this.proc.signalCode}) before printing ${re}:\n${this.transcript()}`);
      }
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no line ${re} in time:\n${this.transcript()}`);
      await new Promise<void>((res) => {
        const t = setTimeout(res, left);
        this.waiters.push(() => {
          clearTimeout(t);
          res();
        });
      });
    }
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

  /** SIGKILL, as a crash: resolves once the process is gone. */
  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
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
