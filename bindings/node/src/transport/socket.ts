/**
 * The agent's Unix socket: a FrameStream over net.Socket, opened only once
 * the user serving it is trusted (peercred.ts).
 *
 * Writes and backpressure: write() hands the bytes to the socket and never
 * waits. When the kernel's buffer is full, net.Socket queues them in this
 * process (socket.write returns false) and sends them as the agent reads;
 * nothing awaits a write, so nothing slows the writer. What bounds that queue
 * is the connection above: it keeps at most the handshake's max_in_flight
 * requests unanswered, and the agent, which stops reading only past that
 * bound, reads whatever is queued below it. So the queued bytes are at most
 * those requests' frames (and the cancel_requests for some of them).
 * queuedBytes() says how many bytes wait, for diagnostics.
 */
import net from 'node:net';
import path from 'node:path';
import fs from 'node:fs';
import type { Endpoint, FrameStream } from './stream';
import { DBOSAgentUnavailableError, DBOSAgentUntrustedError } from '../error';
import { checkPeer, processTrustPolicy, TrustPolicy } from './peercred';

/** The environment variable naming the agent's socket. */
export const SOCKET_ENV = 'DBOS_AGENT_SOCKET';

/**
 * The agent's default socket, as `dbos-agent serve` computes it: in the
 * user's runtime directory when it is theirs alone, else in a directory of
 * their own under the temp directory (PROTOCOL.md section 1).
 */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && privateDir(runtime)) {
    return path.join(runtime, 'dbos-agent.sock');
  }
  const tmp = env.TMPDIR || '/tmp';
  return path.join(tmp, `dbos-agent-${uid()}`, 'agent.sock');
}

/** Whether dir is a directory of this user that neither group nor others may write (the agent's rule for its default). */
function privateDir(dir: string): boolean {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    return false;
  }
  return st.isDirectory() && st.uid === uid() && (st.mode & 0o022) === 0;
}

function uid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : -1;
}

/** The socket to use: the configured one, else env DBOS_AGENT_SOCKET, else the agent's default. */
export function resolveSocketPath(configured?: string, env: NodeJS.ProcessEnv = process.env): string {
  return configured || env[SOCKET_ENV] || defaultSocketPath(env);
}

// What the common errors of connect(2) say (strerror's words), for messages.
const REASONS: Record<string, string> = {
  ENOENT: 'No such file or directory',
  ECONNREFUSED: 'Connection refused',
  EACCES: 'Permission denied',
  ENOTDIR: 'Not a directory',
  EAGAIN: 'Resource temporarily unavailable (the agent is not accepting connections)',
  ENAMETOOLONG: 'File name too long',
  ENOTSOCK: 'Socket operation on non-socket',
  EPROTOTYPE: 'Protocol wrong type for socket',
};

function reason(e: NodeJS.ErrnoException): string {
  return (e.code && REASONS[e.code]) || e.message;
}

/** The agent's Unix socket, served by a user this process trusts. */
export class SocketEndpoint implements Endpoint {
  readonly policy: TrustPolicy;

  constructor(
    readonly path: string,
    policy?: TrustPolicy,
  ) {
    this.policy = policy ?? processTrustPolicy();
  }

  describe(): string {
    return `the dbos-agent at ${this.path}`;
  }

  open(): Promise<FrameStream> {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection({ path: this.path });
      // Read nothing until the peer is checked (a paused socket does not
      // start reading when it connects).
      sock.pause();
      const onError = (e: NodeJS.ErrnoException) => {
        sock.destroy();
        reject(
          new DBOSAgentUnavailableError(
            `cannot reach the dbos-agent at ${this.path}: ${reason(e)} ` +
              '(is `dbos-agent serve` running? set config agentSocket or env DBOS_AGENT_SOCKET)',
          ),
        );
      };
      sock.once('error', onError);
      sock.once('connect', () => {
        sock.off('error', onError);
        try {
          checkPeer(socketFd(sock), this.path, this.policy);
        } catch (e) {
          sock.destroy();
          reject(
            e instanceof DBOSAgentUntrustedError
              ? e
              : new DBOSAgentUntrustedError(`cannot check who serves the dbos-agent socket ${this.path}: ${String(e)}`, this.path),
          );
          return;
        }
        resolve(new SocketStream(sock));
      });
    });
  }
}

/** The file descriptor under a connected net.Socket (libuv's pipe handle). */
function socketFd(sock: net.Socket): number {
  const fd = (sock as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    throw new Error('the socket has no file descriptor');
  }
  return fd;
}

/** A connected, checked socket's frames. */
export class SocketStream implements FrameStream {
  private ended = false;
  private closing = false;
  private error?: Error;
  private onEnd?: (err?: Error) => void;

  constructor(private readonly sock: net.Socket) {
    // An error before start() (the agent going away) ends the stream then.
    sock.on('error', (e) => {
      this.error ??= new DBOSAgentUnavailableError(`the connection to the dbos-agent was lost: ${e.message}`);
    });
    sock.on('close', () => this.end());
  }

  write(frames: Uint8Array): void {
    if (this.closing || this.ended) {
      return; // the stream has ended: the connection fails what it sent
    }
    this.sock.write(frames);
  }

  start(onData: (chunk: Uint8Array) => void, onEnd: (err?: Error) => void): void {
    this.onEnd = onEnd;
    if (this.ended) {
      this.ended = false;
      this.end();
      return;
    }
    this.sock.on('data', (chunk: Buffer) => {
      if (!this.closing && !this.ended) onData(chunk);
    });
    this.sock.resume();
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.sock.destroy();
  }

  /** Bytes written and not yet taken by the kernel. */
  queuedBytes(): number {
    return this.sock.writableLength;
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    const cb = this.onEnd;
    if (cb === undefined) return; // start() calls it
    this.onEnd = undefined;
    if (this.closing) {
      cb();
    } else {
      cb(this.error ?? new DBOSAgentUnavailableError('the dbos-agent closed the connection'));
    }
  }
}
