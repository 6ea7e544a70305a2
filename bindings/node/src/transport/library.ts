/**
 * The agent through libdbos.so (cgo/README.md is its C ABI): a FrameStream
 * over a library handle, so the connection above speaks the same frames as
 * over the socket. The library is loaded through koffi once per process, at
 * the first open (one Go runtime per process: another path is refused).
 *
 * None of the library's calls runs on the event loop, since each may block:
 *
 * - dbos_recv runs as a koffi asynchronous call (`fn.async`, a job of
 *   libuv's thread pool): one at a time per handle, each waiting at most
 *   `recvTimeoutMs` (200 ms by default), then the next is queued. The
 *   bytes are copied, given to onData and freed with dbos_free; DBOS_CLOSED
 *   ends the loop. The finite wait matters: libuv's pool has 4 threads by
 *   default (UV_THREADPOOL_SIZE), shared with fs, dns.lookup, crypto and
 *   zlib; a receive that waited without bound would hold its thread for the
 *   session's life, and a few handles would starve the rest. Returning every
 *   200 ms lets the pool's queued work through (it is FIFO) at that latency
 *   at worst. A frame is delivered as soon as it arrives, whatever the wait.
 * - dbos_send may block while the session's inbound bound holds: it is an
 *   asynchronous call too, one at a time per handle so frames keep their
 *   order; what write() queues meanwhile goes in the next call, concatenated
 *   (at most SEND_BATCH bytes at once). As on the socket, nothing awaits a
 *   write and the queue is bounded by the connection's in-flight bound.
 * - dbos_close (which wakes a blocked dbos_recv, and in embedded mode may
 *   drain the engine when the last handle closes) is asynchronous too.
 * - dbos_open may take seconds (embedded mode waits up to 30 s for its
 *   database) and its message is the one that matters ("served by uid N",
 *   why the database is unreachable). The library keeps each thread's last
 *   error (dbos_last_error is per thread), and a koffi async call runs on
 *   whichever pool thread is free, so a second async call could not read
 *   it. dbos_open therefore runs in a short-lived worker thread
 *   (worker_threads), which calls dbos_open and then dbos_last_error
 *   synchronously on its own thread and posts both back.
 *
 * For the other calls' failures the message is made from the return code,
 * whose meaning the contract fixes (DBOS_CLOSED, DBOS_ERR_FORKED, ...): the
 * thread that failed cannot be asked.
 */
import koffi from 'koffi';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import type { Endpoint, FrameStream } from './stream';
import {
  DBOSAgentForkedError,
  DBOSAgentUnavailableError,
  DBOSInitializationError,
} from '../error';
import { untrustedError } from './peercred';

/** The environment variable naming libdbos.so. */
export const LIBRARY_ENV = 'DBOS_AGENT_LIBRARY';

// The return codes of libdbos.h.
export const DBOS_OK = 0;
export const DBOS_TIMEOUT = 1;
export const DBOS_CLOSED = 2;
export const DBOS_ERR_INVALID = 3;
export const DBOS_ERR_FORKED = 4;
export const DBOS_ERR_UNAVAILABLE = 5;
export const DBOS_ERR_INTERNAL = 6;

const CODE_NAMES: Record<number, string> = {
  [DBOS_TIMEOUT]: 'DBOS_TIMEOUT',
  [DBOS_CLOSED]: 'DBOS_CLOSED',
  [DBOS_ERR_INVALID]: 'DBOS_ERR_INVALID',
  [DBOS_ERR_FORKED]: 'DBOS_ERR_FORKED',
  [DBOS_ERR_UNAVAILABLE]: 'DBOS_ERR_UNAVAILABLE',
  [DBOS_ERR_INTERNAL]: 'DBOS_ERR_INTERNAL',
};

/** How long one dbos_recv waits before the next is queued (see the module). */
export const DEFAULT_RECV_TIMEOUT_MS = 200;
/** The most bytes of queued writes one dbos_send carries. */
const SEND_BATCH = 1 << 20;

/** A handle: koffi gives a uint64 as a number when it is exact, else a bigint. */
type Handle = number | bigint;
type Callback = (err: unknown, rc: number) => void;
interface AsyncFn<A extends unknown[]> {
  (...args: A): number;
  async(...args: [...A, Callback]): void;
}

/** libdbos.so, loaded in this process. */
export class Library {
  readonly version: string;
  readonly send: AsyncFn<[Handle, Uint8Array, number]>;
  readonly recv: AsyncFn<[Handle, number, unknown[], number[]]>;
  readonly free: (p: unknown) => void;
  readonly close: AsyncFn<[Handle]>;

  constructor(readonly path: string) {
    let lib: koffi.IKoffiLib;
    try {
      lib = koffi.load(path);
    } catch (e) {
      throw new DBOSInitializationError(
        `cannot load libdbos.so from ${path} (config agentLibrary, env ${LIBRARY_ENV}): ${(e as Error).message}`,
      );
    }
    this.version = String(lib.func('const char *dbos_version(void)')() ?? '');
    this.send = lib.func('int dbos_send(uint64_t handle, const void *bytes, size_t len)') as unknown as Library['send'];
    this.recv = lib.func(
      'int dbos_recv(uint64_t handle, int32_t timeout_ms, _Out_ void **bytes_out, _Out_ size_t *len_out)',
    ) as unknown as Library['recv'];
    this.free = lib.func('void dbos_free(void *bytes)') as unknown as Library['free'];
    this.close = lib.func('int dbos_close(uint64_t handle)') as unknown as Library['close'];
  }

  /**
   * Opens a handle from a JSON config, on a worker thread that reads the
   * failure's message on the thread that failed (see the module).
   */
  open(config: Record<string, unknown>): Promise<{ rc: number; handle: Handle; message: string }> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(`(${openInWorker.toString()})()`, {
        eval: true,
        workerData: { koffi: require.resolve('koffi'), library: this.path, config: JSON.stringify(config) },
        // None of the host's flags (--require, --import, loaders): the
        // thread makes one call.
        execArgv: [],
      });
      let settled = false;
      worker.once('message', (m: { rc: number; handle: Handle; message: string }) => {
        settled = true;
        resolve(m);
      });
      worker.once('error', (e) => {
        settled = true;
        reject(new DBOSAgentUnavailableError(`dbos_open of libdbos.so failed: ${e.message}`));
      });
      worker.once('exit', (code) => {
        if (!settled) reject(new DBOSAgentUnavailableError(`dbos_open of libdbos.so ended its thread (exit ${code})`));
      });
    });
  }
}

/**
 * The body of dbos_open's worker thread, run from its source text: so it
 * uses nothing but its own requires and workerData.
 */
function openInWorker(): void {
  const { workerData, parentPort } = require('node:worker_threads');
  const k = require(workerData.koffi);
  const lib = k.load(workerData.library);
  const open = lib.func('int dbos_open(const void *config, size_t config_len, _Out_ uint64_t *handle_out)');
  const lastError = lib.func('const char *dbos_last_error(void)');
  const config = Buffer.from(workerData.config, 'utf8');
  const handle = [0];
  const rc = open(config, config.length, handle);
  const message = rc === 0 ? '' : String(lastError() ?? '');
  parentPort.postMessage({ rc, handle: handle[0], message });
}

let loaded: Library | undefined;

/**
 * The process's one libdbos.so: loaded at the first call, the same one after;
 * another path is refused (a process holds one Go runtime).
 */
export function loadLibrary(file: string): Library {
  if (loaded === undefined) {
    loaded = new Library(file);
  } else if (path.resolve(loaded.path) !== path.resolve(file)) {
    throw new DBOSInitializationError(
      `libdbos.so is already loaded from ${loaded.path}; a process holds one Go runtime, so it cannot load ${file} beside it`,
    );
  }
  return loaded;
}

/** The error of a failing call's code, with the library's message when there is one. */
export function libraryError(rc: number, call: string, message = ''): Error {
  const detail = message || `${call} returned ${CODE_NAMES[rc] ?? rc}`;
  switch (rc) {
    case DBOS_ERR_FORKED:
      return new DBOSAgentForkedError(
        `DBOS cannot be used in this process (${process.pid}), a child forked after libdbos.so was loaded ` +
          `or its session opened: open it after forking. libdbos.so: ${detail}`,
      );
    case DBOS_ERR_INVALID:
      return new DBOSInitializationError(`libdbos.so refused ${call}: ${detail}`);
    case DBOS_CLOSED:
      return new DBOSAgentUnavailableError(`the libdbos.so session ended: ${detail}`);
    case DBOS_ERR_INTERNAL:
      return new DBOSAgentUnavailableError(
        `a failure inside libdbos.so (${call}; the session is closed): ${detail}`,
      );
    default:
      return new DBOSAgentUnavailableError(detail);
  }
}

// How connect mode's refusal of a socket served by an untrusted user names
// the user (cgo/README.md: the words are part of the contract).
const UNTRUSTED = /served by uid (\d+)/;

/** libdbos.so's modes (cgo/README.md). */
export type LibraryMode = 'embedded' | 'sidecar' | 'connect';
export const LIBRARY_MODES: readonly LibraryMode[] = ['embedded', 'sidecar', 'connect'];

export interface LibraryEndpointOptions {
  /** How long each dbos_recv waits (ms; see the module). Tests lengthen it to see dbos_close wake it. */
  recvTimeoutMs?: number;
}

/** The agent through libdbos.so, in one of its modes; `config` is dbos_open's JSON. */
export class LibraryEndpoint implements Endpoint {
  readonly mode: LibraryMode;
  private readonly where: string;
  private readonly recvTimeoutMs: number;

  constructor(
    readonly library: string,
    readonly config: Record<string, unknown> & { mode: LibraryMode },
    options: LibraryEndpointOptions = {},
  ) {
    this.mode = config.mode;
    this.recvTimeoutMs = options.recvTimeoutMs ?? DEFAULT_RECV_TIMEOUT_MS;
    if (this.mode === 'connect') {
      this.where = `at ${String(config.socket)} (through libdbos.so)`;
    } else if (this.mode === 'sidecar') {
      this.where = 'in a sidecar process of libdbos.so';
    } else {
      this.where = 'embedded in this process (libdbos.so)';
    }
  }

  /** Whether the endpoint runs the agent itself on the configured database (embedded, sidecar). */
  get runsAgent(): boolean {
    return this.mode !== 'connect';
  }

  describe(): string {
    return `the dbos-agent ${this.where}`;
  }

  async open(): Promise<FrameStream> {
    const lib = loadLibrary(this.library);
    const { rc, handle, message } = await lib.open(this.config);
    if (rc === DBOS_OK) {
      return new LibraryStream(lib, handle, this.describe(), this.recvTimeoutMs);
    }
    if (rc === DBOS_ERR_UNAVAILABLE) {
      const untrusted = this.mode === 'connect' ? UNTRUSTED.exec(message) : null;
      if (untrusted) {
        // The library checked who serves the socket and refused it, as the
        // socket transport does: the same typed error.
        throw untrustedError(String(this.config.socket), Number(untrusted[1]), uid(), ` (libdbos.so: ${message})`);
      }
      const hint =
        this.mode === 'connect'
          ? ' (is `dbos-agent serve` running? set config agentSocket or env DBOS_AGENT_SOCKET)'
          : '';
      const verb = this.runsAgent ? 'start' : 'reach';
      throw new DBOSAgentUnavailableError(`cannot ${verb} the dbos-agent ${this.where}: ${message}${hint}`);
    }
    throw libraryError(rc, 'dbos_open', message);
  }
}

function uid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : -1;
}

/** One library handle: a session's frames. */
export class LibraryStream implements FrameStream {
  private onData?: (chunk: Uint8Array) => void;
  private onEnd?: (err?: Error) => void;
  private closing = false;
  private ended = false;
  private released = false;
  private receiving = false;
  private sending = false;
  private readonly queue: Uint8Array[] = [];
  private queued = 0;
  /** dbos_recv calls made (for tests: a receive is under way). */
  recvCalls = 0;

  constructor(
    private readonly lib: Library,
    readonly handle: Handle,
    private readonly where: string,
    private readonly recvTimeoutMs: number,
  ) {}

  write(frames: Uint8Array): void {
    if (this.closing || this.ended) {
      return; // the stream has ended: the connection fails what it sent
    }
    this.queue.push(frames);
    this.queued += frames.length;
    this.pumpSend();
  }

  start(onData: (chunk: Uint8Array) => void, onEnd: (err?: Error) => void): void {
    this.onData = onData;
    this.onEnd = onEnd;
    this.pumpRecv();
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.queue.length = 0;
    this.queued = 0;
    this.release();
    if (!this.receiving) this.end();
  }

  /** Bytes written and not yet given to dbos_send. */
  queuedBytes(): number {
    return this.queued;
  }

  /** Whether a dbos_recv is under way. */
  get receivePending(): boolean {
    return this.receiving;
  }

  private pumpRecv(): void {
    if (this.closing || this.ended) {
      this.end();
      return;
    }
    const bytes: unknown[] = [null];
    const len: number[] = [0];
    this.receiving = true;
    this.recvCalls++;
    this.lib.recv.async(this.handle, this.recvTimeoutMs, bytes, len, (err, rc) => {
      this.receiving = false;
      if (err) {
        this.fail(new DBOSAgentUnavailableError(`dbos_recv of libdbos.so failed: ${String(err)}`));
        return;
      }
      switch (rc) {
        case DBOS_OK: {
          let chunk: Uint8Array;
          try {
            // A copy (koffi.decode of an array makes a new Uint8Array), so
            // the library's buffer can be freed at once.
            chunk = len[0] > 0 ? (koffi.decode(bytes[0], 'uint8_t', len[0]) as Uint8Array) : new Uint8Array(0);
          } finally {
            this.lib.free(bytes[0]);
          }
          const onData = this.closing || this.ended ? undefined : this.onData;
          // The next receive first: a receiver that throws (an uncaught
          // exception, as from a socket's data listener) stops nothing.
          this.pumpRecv();
          if (chunk.length > 0) onData?.(chunk);
          return;
        }
        case DBOS_TIMEOUT:
          this.pumpRecv();
          return;
        case DBOS_CLOSED:
          this.fail(new DBOSAgentUnavailableError(`the session with ${this.where} ended`));
          return;
        default:
          // After close(), the handle is gone under a receive that started
          // before: DBOS_ERR_INVALID then is its end.
          this.fail(libraryError(rc, 'dbos_recv'));
      }
    });
  }

  private pumpSend(): void {
    if (this.sending || this.queue.length === 0 || this.closing || this.ended) return;
    let batch: Uint8Array;
    if (this.queue.length === 1 || this.queue[0].length >= SEND_BATCH) {
      batch = this.queue.shift()!;
    } else {
      const parts: Uint8Array[] = [];
      let n = 0;
      while (this.queue.length > 0 && n + this.queue[0].length <= SEND_BATCH) {
        const part = this.queue.shift()!;
        parts.push(part);
        n += part.length;
      }
      batch = Buffer.concat(parts, n);
    }
    this.queued -= batch.length;
    this.sending = true;
    // `batch` stays referenced by this closure until the call returns: koffi
    // passes a buffer's memory to C without copying it.
    this.lib.send.async(this.handle, batch, batch.length, (err, rc) => {
      this.sending = false;
      void batch; // held until here
      if (err) {
        this.fail(new DBOSAgentUnavailableError(`dbos_send of libdbos.so failed: ${String(err)}`));
        return;
      }
      if (rc === DBOS_OK) {
        this.pumpSend();
      } else if (rc === DBOS_CLOSED) {
        // The session ended: the receive loop ends the stream (after
        // delivering what was queued for it).
        this.queue.length = 0;
        this.queued = 0;
      } else {
        this.fail(libraryError(rc, 'dbos_send'));
      }
    });
  }

  /** The stream ends by itself (or, when closing, by close()). */
  private fail(err: Error): void {
    this.release();
    this.end(this.closing ? undefined : err);
  }

  /** dbos_close, once: frees the handle and wakes a blocked dbos_recv. */
  private release(): void {
    if (this.released) return;
    this.released = true;
    this.lib.close.async(this.handle, () => {
      // Its code tells nothing to act on: a handle the agent ended first
      // is closed anyway.
    });
  }

  private end(err?: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.queue.length = 0;
    this.queued = 0;
    const cb = this.onEnd;
    this.onEnd = undefined;
    this.onData = undefined;
    cb?.(this.closing ? undefined : err);
  }
}
