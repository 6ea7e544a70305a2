/**
 * The connection to the agent: one stream per process, shared by every
 * workflow and caller. Requests are multiplexed by id (PROTOCOL.md section
 * 4); pushes (`run`, `cancel`) go to the handler the worker installs.
 *
 * The agent handles at most `max_in_flight` requests of a connection at
 * once and stops reading past that, so a request waits here for a place
 * while that many are unanswered. A caller that gives up (its AbortSignal
 * fires) sends `cancel_request`, which ends a wait on the agent's side at
 * once; the request keeps its place until its late answer comes, as it does
 * in the agent.
 *
 * An `AgentLink` owns the connection's lifetime: it connects, says hello,
 * and when the stream ends fails what was in flight and reconnects with
 * backoff. Everything above sees `request()`.
 */
import {
  CLOSING_CODES,
  Code,
  DEFAULT_MAX_FRAME_SIZE,
  Envelope,
  FrameReader,
  KIND_PUSH,
  KIND_REQUEST,
  KIND_RESPONSE,
  WireError,
  AgentErrorReply,
  decodeEnvelope,
  encodeFrame,
  frameLength,
} from './protocol';
import type { Endpoint, FrameStream } from './transport/stream';
import { DBOSAgentUnavailableError } from './error';

export type PushHandler = (op: string, body: Record<string, unknown>, conn: Connection) => void;

export interface HelloReply {
  version: number;
  agent_version: string;
  max_frame_size: number;
  session_id: string;
  executor_id: string;
  app_version: string;
  max_in_flight?: number;
}

export interface RequestOptions {
  /** Aborting it gives the request up: a wait is cancelled on the agent too. */
  signal?: AbortSignal;
}

interface Pending {
  op: string;
  resolve: (body: Record<string, unknown>) => void;
  reject: (err: Error) => void;
  /** The caller has gone: the answer is dropped when it comes. */
  abandoned: boolean;
}

export class Connection {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly reader = new FrameReader();
  private maxInFlight = Number.MAX_SAFE_INTEGER;
  private maxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  /** Callers waiting for a place under max_in_flight, in order. */
  private readonly waitingForPlace: Array<() => void> = [];
  private inFlight = 0;
  private closedWith?: Error;
  private readonly closeListeners: Array<(err: Error) => void> = [];
  hello?: HelloReply;

  constructor(
    private readonly stream: FrameStream,
    private readonly where: string,
    private onPush: PushHandler | undefined,
  ) {
    stream.start(
      (chunk) => this.received(chunk),
      (err) => this.ended(err),
    );
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Called once when the connection ends, with why. */
  onClose(listener: (err: Error) => void): void {
    if (this.closedWith) listener(this.closedWith);
    else this.closeListeners.push(listener);
  }

  async sayHello(body: Record<string, unknown>): Promise<HelloReply> {
    const reply = (await this.send('hello', body, undefined, false)) as unknown as HelloReply;
    this.hello = reply;
    if (reply.max_in_flight) this.maxInFlight = reply.max_in_flight;
    if (reply.max_frame_size) this.maxFrameSize = reply.max_frame_size;
    return reply;
  }

  request(op: string, body: Record<string, unknown>, options?: RequestOptions): Promise<Record<string, unknown>> {
    return this.send(op, body, options?.signal, true);
  }

  close(): void {
    this.stream.close();
  }

  private async send(
    op: string,
    body: Record<string, unknown>,
    signal: AbortSignal | undefined,
    counted: boolean,
  ): Promise<Record<string, unknown>> {
    if (this.closedWith) throw this.closedWith;
    signal?.throwIfAborted();
    if (counted) {
      while (this.inFlight >= this.maxInFlight) {
        await new Promise<void>((wake) => this.waitingForPlace.push(wake));
        if (this.closedWith) throw this.closedWith;
        signal?.throwIfAborted();
      }
      this.inFlight++;
    }
    const id = this.nextId++;
    const frame = encodeFrame({ kind: KIND_REQUEST, id, op, body });
    if (frameLength(frame) > this.maxFrameSize) {
      if (counted) this.release();
      throw new AgentErrorReply(
        {
          code: Code.frame_too_large,
          name: 'frame_too_large',
          message: `${op}: the request is ${frameLength(frame)} bytes; the agent accepts at most ${this.maxFrameSize}`,
        },
        op,
      );
    }
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const entry: Pending = {
        op,
        abandoned: false,
        resolve: (b) => {
          if (counted) this.release();
          signal?.removeEventListener('abort', onAbort);
          resolve(b);
        },
        reject: (e) => {
          if (counted) this.release();
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      const onAbort = () => {
        if (entry.abandoned) return;
        entry.abandoned = true;
        reject(signal!.reason instanceof Error ? signal!.reason : new Error('request aborted'));
        // The place stays taken until the agent answers (the request is still in flight there).
        if (!this.closedWith) this.writeFrame(encodeFrame({ kind: KIND_REQUEST, id: this.nextId++, op: 'cancel_request', body: { request_id: id } }));
      };
      this.pending.set(id, entry);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.writeFrame(frame);
    });
  }

  private writeFrame(frame: Uint8Array): void {
    try {
      this.stream.write(frame);
    } catch (err) {
      this.ended(err as Error);
    }
  }

  private release(): void {
    this.inFlight--;
    const next = this.waitingForPlace.shift();
    if (next) next();
  }

  private received(chunk: Uint8Array): void {
    let bodies: Uint8Array[];
    try {
      bodies = this.reader.push(chunk);
    } catch (err) {
      this.ended(err as Error);
      this.stream.close();
      return;
    }
    for (const body of bodies) {
      let env: Envelope;
      try {
        env = decodeEnvelope(body);
      } catch (err) {
        this.ended(err as Error);
        this.stream.close();
        return;
      }
      this.dispatch(env);
    }
  }

  private dispatch(env: Envelope): void {
    if (env.kind === KIND_RESPONSE) {
      if (env.id === 0) {
        this.connectionError(env.error ?? undefined);
        return;
      }
      const entry = this.pending.get(env.id);
      if (!entry) return; // an answer to a cancel_request, or to nothing we track
      this.pending.delete(env.id);
      if (env.error) {
        entry.reject(new AgentErrorReply(env.error, entry.op));
      } else {
        entry.resolve(env.body ?? {});
      }
      return;
    }
    if (env.kind === KIND_PUSH) {
      if (env.op && this.onPush) this.onPush(env.op, env.body ?? {}, this);
      return;
    }
    // A request from the agent: version 1 agents send none, and a binding
    // sends only requests (section 4), so it is ignored.
  }

  private connectionError(error: WireError | undefined): void {
    const err = new AgentErrorReply(
      error ?? { code: Code.internal, name: 'internal', message: 'connection-level error without details' },
      'connection',
    );
    if (error && CLOSING_CODES.has(error.code)) {
      this.ended(new DBOSAgentUnavailableError(`the dbos-agent at ${this.where} closed the connection: ${error.message}`, { cause: err }));
      this.stream.close();
    }
  }

  private ended(err?: Error): void {
    if (this.closedWith) return;
    this.closedWith =
      err instanceof DBOSAgentUnavailableError
        ? err
        : new DBOSAgentUnavailableError(
            `lost the connection to the dbos-agent at ${this.where}${err ? `: ${err.message}` : ''}`,
            { cause: err },
          );
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) p.reject(this.closedWith);
    this.inFlight = 0;
    for (const wake of this.waitingForPlace.splice(0)) wake();
    for (const l of this.closeListeners.splice(0)) l(this.closedWith);
  }
}

export interface LinkOptions {
  endpoint: Endpoint;
  /** Builds the hello of each new connection (a worker's announces everything declared so far). */
  hello: () => Record<string, unknown>;
  onPush?: PushHandler;
  /** A new connection is live (after its hello). */
  onConnected?: (conn: Connection, reply: HelloReply) => void | Promise<void>;
  /** The live connection ended. */
  onDisconnected?: (conn: Connection, err: Error) => void;
  /** Reports a failed reconnection attempt (for the log). */
  onRetry?: (err: Error, attempt: number, delayMs: number) => void;
}

/**
 * Keeps one connection alive: the first connect fails loudly (launch must
 * say the agent is missing), later losses reconnect with backoff for as
 * long as the link is open.
 */
export class AgentLink {
  private conn?: Connection;
  private connecting?: Promise<Connection>;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;
  private readonly waiters: Array<{ resolve: (c: Connection) => void; reject: (e: Error) => void }> = [];

  constructor(private readonly options: LinkOptions) {}

  get endpoint(): Endpoint {
    return this.options.endpoint;
  }

  /** The live connection, if there is one now. */
  get current(): Connection | undefined {
    return this.conn && !this.conn.closed ? this.conn : undefined;
  }

  /** Connects for the first time; rejects when the agent cannot be reached. */
  async open(): Promise<HelloReply> {
    const conn = await this.connectOnce();
    return conn.hello!;
  }

  /**
   * The live connection, or the next one: waits through a reconnection (a
   * caller outside a workflow does not fail because the agent restarted).
   */
  connection(): Promise<Connection> {
    const c = this.current;
    if (c) return Promise.resolve(c);
    if (this.closed) return Promise.reject(new DBOSAgentUnavailableError('DBOS has been shut down: the connection to the dbos-agent is closed'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** A request on the live connection (waiting for one if it is being replaced). */
  async request(op: string, body: Record<string, unknown>, options?: RequestOptions): Promise<Record<string, unknown>> {
    const conn = await this.connection();
    return conn.request(op, body, options);
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.conn?.close();
    const err = new DBOSAgentUnavailableError('DBOS has been shut down: the connection to the dbos-agent is closed');
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  private async connectOnce(): Promise<Connection> {
    if (this.connecting) return this.connecting;
    this.connecting = (async () => {
      const stream = await this.options.endpoint.open();
      const conn = new Connection(stream, this.options.endpoint.describe(), this.options.onPush);
      let reply: HelloReply;
      try {
        reply = await conn.sayHello(this.options.hello());
      } catch (err) {
        conn.close();
        throw err;
      }
      if (this.closed) {
        conn.close();
        throw new DBOSAgentUnavailableError('DBOS has been shut down');
      }
      this.conn = conn;
      conn.onClose((err) => this.lost(conn, err));
      await this.options.onConnected?.(conn, reply);
      for (const w of this.waiters.splice(0)) w.resolve(conn);
      return conn;
    })();
    try {
      return await this.connecting;
    } finally {
      this.connecting = undefined;
    }
  }

  private lost(conn: Connection, err: Error): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.options.onDisconnected?.(conn, err);
    if (!this.closed) this.reconnect(1);
  }

  private reconnect(attempt: number): void {
    // 50 ms doubling to 2 s, with jitter: an agent restart is back within a
    // second or two, and a fleet of workers does not reconnect in step.
    const base = Math.min(2000, 50 * 2 ** Math.min(attempt - 1, 6));
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed) return;
      this.connectOnce().catch((err: Error) => {
        if (this.closed) return;
        this.options.onRetry?.(err, attempt, delay);
        this.reconnect(attempt + 1);
      });
    }, delay);
  }
}
