/**
 * Communication between workflows, as DBOS TypeScript 5.3 offers it:
 * messages (send, recv), events (setEvent, getEvent), streams (writeStream,
 * closeStream, readStream, readStreamOffset), durable sleep and patches.
 *
 * From workflow code each operation is durable (PROTOCOL.md section 2.14):
 * it takes its function ids from the run's counter before any await, as DBOS
 * does, replays from the run's history where the table of section 2.14 says
 * so, and otherwise asks the agent, which records the operation and its step
 * in one transaction. Values are written with the engine's serializer, so
 * DBOS TypeScript reads what this binding writes and the reverse.
 */
import { currentContext, DBOSContext, HistoryStep, RunState } from './context';
import { Code, AgentErrorReply } from './protocol';
import {
  DBOSError,
  DBOSInvalidWorkflowTransitionError,
  DBOSNonExistentWorkflowError,
  DBOSStreamNondeterminismError,
  DBOSStreamTimeoutError,
} from './error';
import { DBOSPortableJSON, deserializeValue, serializeError, serializeValue } from './serialization';
import { Engine, interruptibleSleep } from './runtime';
import { requireEngine } from './dbos';
import type { PollingOptions, WorkflowSerializationFormat } from './types';

// ---- the option types (DBOS TypeScript 5.3's, same names and fields) --------

/** Options for `DBOS.send`. */
export interface SendOptions {
  /** Serialization format override, allows cross-language send/recv. */
  serializationType?: WorkflowSerializationFormat;
}

/** Options for `DBOS.writeStream`. */
export interface WriteStreamOptions {
  /** Serialization format override, allows cross-language writeStream / readStream. */
  serializationType?: WorkflowSerializationFormat;
}

/** Options for `DBOS.readStream` (and a client's readStream). */
export interface ReadStreamOptions extends PollingOptions {
  /** Offset to start reading from (defaults to 0, the start of the stream). */
  offset?: number;
  /**
   * How long to wait for each value before throwing `DBOSStreamTimeoutError`, in seconds.
   * The clock restarts every time a value is delivered. Defaults to waiting indefinitely.
   */
  timeoutSeconds?: number;
}

/** Options for `DBOS.readStreamOffset`, which takes its offset as an argument. */
export type ReadStreamOffsetOptions = Omit<ReadStreamOptions, 'offset'>;

/** Options for `DBOS.recv`. */
export interface RecvOptions extends PollingOptions {
  /** Timeout in seconds; if no message is received before the timeout (default 60 seconds), `null` is returned. */
  timeoutSeconds?: number;
  /** Absolute deadline, epoch ms; if no message is received before this time, `null` is returned. */
  deadlineEpochMS?: number;
}

/** Options for `DBOS.getEvent`. */
export interface GetEventOptions extends PollingOptions {
  /** Timeout in seconds; if no event is set before the timeout (default 60 seconds), `null` is returned. */
  timeoutSeconds?: number;
  /** Absolute deadline, epoch ms; if no event is set before this time, `null` is returned. */
  deadlineEpochMS?: number;
}

/** Options for `DBOS.setEvent`. */
export interface SetEventOptions {
  /** Serialization format override, allows the event to be read by workflows or clients in other languages. */
  serializationType?: WorkflowSerializationFormat;
}

// ---- names and constants DBOS uses ------------------------------------------

/** What DBOS waits for a message or an event when the call gives no timeout. */
export const DEFAULT_NOTIFICATION_TIMEOUT_SEC = 60;

const SEND = 'DBOS.send';
const RECV = 'DBOS.recv';
const SLEEP = 'DBOS.sleep';
const SET_EVENT = 'DBOS.setEvent';
const GET_EVENT = 'DBOS.getEvent';
const WRITE_STREAM = 'DBOS.writeStream';
const CLOSE_STREAM = 'DBOS.closeStream';
const READ_STREAM = 'DBOS.readStream';
const READ_STREAM_OFFSET = 'DBOS.readStreamOffset';

/** The value a closed stream ends with (DBOS stores it in portable JSON). */
export const DBOS_STREAM_CLOSED_SENTINEL = '__DBOS_STREAM_CLOSED__';

/** setTimeout's longest delay; longer sleeps are waited in pieces. */
const MAX_TIMER_MS = 2 ** 31 - 1;

// ---- options as DBOS resolves them ------------------------------------------

/** The timeout of a recv, getEvent or getResult in seconds (a deadline counts from now). */
export function resolveTimeoutSeconds(options?: number | RecvOptions | GetEventOptions): number | undefined {
  if (options === undefined) return undefined;
  if (typeof options === 'number') return options;
  if (options.deadlineEpochMS !== undefined) return Math.max(0, (options.deadlineEpochMS - Date.now()) / 1000);
  return options.timeoutSeconds;
}

/** Checks a polling interval as DBOS does (the agent is woken by notifications; it is not used). */
export function resolvePollingIntervalMs(options?: number | PollingOptions): number | undefined {
  if (options === undefined || typeof options === 'number') return undefined;
  const interval = options.pollingIntervalMs;
  if (interval === undefined) return undefined;
  if (!Number.isFinite(interval) || interval <= 0) throw new DBOSError('pollingIntervalMs must be a positive finite number');
  return interval;
}

function resolveStreamOffset(options: ReadStreamOptions): number {
  const offset = options.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0) throw new DBOSError('offset must be a non-negative integer');
  return offset;
}

function resolveStreamTimeoutMS(options: ReadStreamOptions): number | undefined {
  const seconds = options.timeoutSeconds;
  if (seconds === undefined) return undefined;
  if (!Number.isFinite(seconds) || seconds < 0) throw new DBOSError('timeoutSeconds must not be negative');
  return seconds * 1000;
}

function resolveStreamOptions(options: ReadStreamOptions): { offset: number; timeoutMS: number | undefined } {
  const offset = resolveStreamOffset(options);
  const interval = resolvePollingIntervalMs(options);
  if (interval !== undefined && interval < 1) throw new DBOSError('pollingIntervalMs must be at least 1 millisecond');
  return { offset, timeoutMS: resolveStreamTimeoutMS(options) };
}

// ---- shared pieces ----------------------------------------------------------

/** Where a call is made from: workflow code, a step of a workflow, or neither. */
type Site =
  | { kind: 'workflow'; run: RunState; ctx: DBOSContext }
  | { kind: 'step'; run: RunState; ctx: DBOSContext; stepID: number }
  | { kind: 'outside' };

function site(): Site {
  const ctx = currentContext();
  if (!ctx?.run) return { kind: 'outside' };
  if (ctx.stepFunctionId !== undefined) return { kind: 'step', run: ctx.run, ctx, stepID: ctx.stepFunctionId };
  return { kind: 'workflow', run: ctx.run, ctx };
}

/** The format a value is written in: the call's, else portable JSON in a workflow started portable (as DBOS). */
function formatFor(s: Site, explicit: WorkflowSerializationFormat): WorkflowSerializationFormat {
  if (explicit !== undefined) return explicit;
  if (s.kind !== 'outside' && s.run.serialization === DBOSPortableJSON.name()) return 'portable';
  return undefined;
}

function caller(run: RunState, functionId: number, inStep = false): Record<string, unknown> {
  return { workflow_id: run.workflowID, owner_xid: run.ownerXid, function_id: functionId, in_step: inStep || undefined };
}

/** A payload read back: nil is DBOS's "nothing", null. */
async function readPayload(e: Engine, value: unknown, serialization: unknown): Promise<unknown> {
  if (value === null || value === undefined) return null;
  return deserializeValue(value as string, (serialization as string | undefined) || null, e.serializer);
}

/** A wait's timeout in whole milliseconds for the agent. */
function waitMs(seconds: number): number {
  return Math.max(0, Math.ceil(seconds * 1000));
}

/** "Nothing" as a recv or getEvent records it when its deadline passes: null in the workflow's format. */
async function nothingFor(e: Engine, s: Site): Promise<{ value: string | null; serialization: string }> {
  return serializeValue(null, e.serializer, formatFor(s, undefined));
}

/** A request of a run, its failures mapped (cancellation and fencing halt the run). */
async function runRequest(
  e: Engine,
  run: RunState,
  op: string,
  body: Record<string, unknown>,
  name: string,
  functionId: number,
  signal?: AbortSignal,
): Promise<Record<string, unknown>> {
  run.throwIfStopped();
  try {
    return await run.conn.request(op, body, { signal });
  } catch (err) {
    throw e.lostRun(run, err, name, functionId);
  }
}

// ---- messages -----------------------------------------------------------------

export async function send<T>(
  destinationID: string,
  message: T,
  topic?: string,
  idempotencyKey?: string,
  options?: SendOptions,
): Promise<void> {
  const e = requireEngine('send');
  const s = site();
  // The id is taken before any await, so concurrent calls of one workflow number as DBOS numbers them.
  const functionId = s.kind === 'workflow' ? s.run.takeFunctionId() : undefined;
  const ser = await serializeValue(message, e.serializer, formatFor(s, options?.serializationType));
  const messages = [
    {
      destination_id: destinationID,
      topic: topic ?? null,
      message: ser.value,
      serialization: ser.serialization,
      idempotency_key: idempotencyKey,
    },
  ];
  const missing = () => new DBOSNonExistentWorkflowError(`Sent to non-existent destination workflow UUID: ${destinationID}`);
  if (s.kind === 'workflow') {
    const run = s.run;
    const fid = functionId!;
    run.throwIfStopped();
    const recorded = e.replayed(run, fid, SEND);
    if (recorded) {
      // A recorded send sent its message already; a recorded failure is raised again.
      await e.revive(recorded);
      return;
    }
    const startedAt = Date.now();
    try {
      await run.conn.request('send', { caller: caller(run, fid), messages });
    } catch (err) {
      if (err instanceof AgentErrorReply && err.code === Code.workflow_not_found) {
        // Nothing was sent and nothing recorded: the failure is the step's outcome (section 2.15).
        const failure = missing();
        const out = await serializeError(failure, e.serializer, undefined);
        await e.record(run, {
          function_id: fid,
          name: SEND,
          output: null,
          error: out.value,
          serialization: out.serialization,
          started_at_epoch_ms: startedAt,
          completed_at_epoch_ms: Date.now(),
        });
        throw failure;
      }
      throw e.lostRun(run, err, SEND, fid);
    }
    return;
  }
  try {
    if (s.kind === 'step') {
      // Not recorded, but it lands only while the run still owns its workflow.
      await runRequest(e, s.run, 'send', { caller: caller(s.run, s.stepID, true), messages }, SEND, s.stepID);
    } else {
      await e.request('send', { messages });
    }
  } catch (err) {
    if (isNotFound(err)) throw missing();
    throw err;
  }
}

function isNotFound(err: unknown): boolean {
  if (err instanceof AgentErrorReply) return err.code === Code.workflow_not_found;
  return err instanceof DBOSNonExistentWorkflowError;
}

export async function recv<T>(topic?: string, options?: number | RecvOptions): Promise<T | null> {
  const e = requireEngine('recv');
  const s = site();
  if (s.kind === 'step') throw new DBOSInvalidWorkflowTransitionError('Invalid call to `DBOS.recv` inside a `step` or `transaction`');
  if (s.kind === 'outside') throw new DBOSInvalidWorkflowTransitionError('Attempt to call `DBOS.recv` outside of a workflow');
  const run = s.run;
  // Two ids, always: the receive, then its deadline (section 2.14).
  const functionId = run.takeFunctionId();
  const timeoutFunctionId = run.takeFunctionId();
  const timeoutSeconds = resolveTimeoutSeconds(options) ?? DEFAULT_NOTIFICATION_TIMEOUT_SEC;
  resolvePollingIntervalMs(options);
  run.throwIfStopped();
  const recorded = e.replayed(run, functionId, RECV);
  if (recorded) return (await readPayload(e, recorded.output, recorded.serialization)) as T | null;
  const nothing = await nothingFor(e, s);
  const reply = await runRequest(
    e,
    run,
    'recv',
    {
      caller: caller(run, functionId),
      timeout_function_id: timeoutFunctionId,
      topic: topic ?? null,
      timeout_ms: waitMs(timeoutSeconds),
      timeout_output: nothing.value,
      timeout_serialization: nothing.serialization,
    },
    RECV,
    functionId,
    run.stop.signal,
  );
  return (await readPayload(e, reply.message, reply.serialization)) as T | null;
}

// ---- events ---------------------------------------------------------------------

export async function setEvent<T>(key: string, value: T, options?: SetEventOptions): Promise<void> {
  const e = requireEngine('setEvent');
  const s = site();
  if (s.kind === 'step') throw new DBOSInvalidWorkflowTransitionError('Invalid call to `DBOS.setEvent` inside a `step` or `transaction`');
  if (s.kind === 'outside') throw new DBOSInvalidWorkflowTransitionError('Attempt to call `DBOS.setEvent` outside of a workflow');
  const run = s.run;
  const functionId = run.takeFunctionId();
  const ser = await serializeValue(value, e.serializer, formatFor(s, options?.serializationType));
  run.throwIfStopped();
  if (e.replayed(run, functionId, SET_EVENT)) return;
  await runRequest(
    e,
    run,
    'set_event',
    { caller: caller(run, functionId), key, value: ser.value, serialization: ser.serialization },
    SET_EVENT,
    functionId,
  );
}

export async function getEvent<T>(workflowID: string, key: string, options?: number | GetEventOptions): Promise<T | null> {
  const e = requireEngine('getEvent');
  const timeoutSeconds = resolveTimeoutSeconds(options) ?? DEFAULT_NOTIFICATION_TIMEOUT_SEC;
  resolvePollingIntervalMs(options);
  const s = site();
  if (s.kind === 'step') throw new DBOSInvalidWorkflowTransitionError('Invalid call to `DBOS.getEvent` inside a `step` or `transaction`');
  if (s.kind === 'outside') {
    const reply = await e.request('get_event', { workflow_id: workflowID, key, timeout_ms: waitMs(timeoutSeconds) });
    return (await readPayload(e, reply.value, reply.serialization)) as T | null;
  }
  const run = s.run;
  const functionId = run.takeFunctionId();
  const timeoutFunctionId = run.takeFunctionId();
  run.throwIfStopped();
  const recorded = e.replayed(run, functionId, GET_EVENT);
  if (recorded) return (await readPayload(e, recorded.output, recorded.serialization)) as T | null;
  const nothing = await nothingFor(e, s);
  const reply = await runRequest(
    e,
    run,
    'get_event',
    {
      workflow_id: workflowID,
      key,
      timeout_ms: waitMs(timeoutSeconds),
      caller: caller(run, functionId),
      timeout_function_id: timeoutFunctionId,
      timeout_output: nothing.value,
      timeout_serialization: nothing.serialization,
    },
    GET_EVENT,
    functionId,
    run.stop.signal,
  );
  return (await readPayload(e, reply.value, reply.serialization)) as T | null;
}

// ---- streams: writing -------------------------------------------------------------

export async function writeStream<T>(key: string, value: T, options: WriteStreamOptions = {}): Promise<void> {
  const e = requireEngine('writeStream');
  const s = site();
  if (s.kind === 'outside') {
    throw new DBOSInvalidWorkflowTransitionError('Invalid call to `DBOS.writeStream` outside of a workflow or step');
  }
  const functionId = s.kind === 'workflow' ? s.run.takeFunctionId() : s.stepID;
  const ser = await serializeValue(value, e.serializer, formatFor(s, options.serializationType));
  await appendToStream(e, s, functionId, WRITE_STREAM, { key, value: ser.value, serialization: ser.serialization });
}

export async function closeStream(key: string): Promise<void> {
  const e = requireEngine('closeStream');
  const s = site();
  if (s.kind === 'outside') {
    throw new DBOSInvalidWorkflowTransitionError('Invalid call to `DBOS.closeStream` outside of a workflow or step');
  }
  const functionId = s.kind === 'workflow' ? s.run.takeFunctionId() : s.stepID;
  await appendToStream(e, s, functionId, CLOSE_STREAM, {
    key,
    value: DBOSPortableJSON.stringify(DBOS_STREAM_CLOSED_SENTINEL),
    serialization: DBOSPortableJSON.name(),
    close: true,
  });
}

async function appendToStream(
  e: Engine,
  s: Exclude<Site, { kind: 'outside' }>,
  functionId: number,
  name: string,
  body: Record<string, unknown>,
): Promise<void> {
  const run = s.run;
  run.throwIfStopped();
  // From a step the write is covered by the step's own record; from workflow code it is step N.
  if (s.kind === 'workflow' && e.replayed(run, functionId, name)) return;
  await runRequest(e, run, 'write_stream', { caller: caller(run, functionId, s.kind === 'step'), ...body }, name, functionId);
}

// ---- streams: reading ---------------------------------------------------------------

/** Stream reads in progress in each run's workflow code (DBOS refuses two at once). */
const activeReads = new WeakMap<RunState, number>();

const NOT_RECORDED: unique symbol = Symbol('not recorded');

/**
 * Records the values workflow code reads from a stream, one step per value
 * (and one for the end), as DBOS TypeScript 5.3 does, so a replayed reader
 * sees the sequence the first run saw. Reads from a step or from outside a
 * workflow are not recorded.
 */
class ReadCheckpoints {
  private run?: RunState;
  private bound = false;
  private inFlight = false;
  private startedAt = 0;

  constructor(
    private readonly e: Engine,
    private readonly key: string,
    private readonly name: string,
  ) {}

  /** The run whose workflow code reads (bound at the first read, as DBOS binds its context). */
  get reader(): RunState | undefined {
    return this.run;
  }

  /** Takes the id recording the next value, or undefined when the read is not recorded. */
  begin(): number | undefined {
    if (!this.bound) {
      this.bound = true;
      const s = site();
      if (s.kind === 'workflow') this.run = s.run;
    }
    const run = this.run;
    if (!run) return undefined;
    if ((activeReads.get(run) ?? 0) > 0) throw new DBOSStreamNondeterminismError(run.workflowID, this.key);
    activeReads.set(run, (activeReads.get(run) ?? 0) + 1);
    this.inFlight = true;
    this.startedAt = Date.now();
    run.throwIfStopped();
    return run.takeFunctionId();
  }

  end(): void {
    if (!this.inFlight) return;
    this.inFlight = false;
    const run = this.run!;
    activeReads.set(run, (activeReads.get(run) ?? 1) - 1);
  }

  /** The value recorded at functionId, or NOT_RECORDED; a recorded timeout is raised again. */
  async replay(functionId: number | undefined): Promise<unknown> {
    if (functionId === undefined) return NOT_RECORDED;
    const recorded = this.e.replayed(this.run!, functionId, this.name);
    if (!recorded) return NOT_RECORDED;
    return this.e.revive(recorded);
  }

  async record(functionId: number | undefined, value: unknown): Promise<void> {
    if (functionId === undefined) return;
    // Read back only by this runtime's replay: written with the application's serializer, as DBOS does.
    const ser = await serializeValue(value, this.e.serializer, undefined);
    await this.write(functionId, { output: ser.value, error: null, serialization: ser.serialization });
  }

  async recordTimeout(functionId: number | undefined, err: Error): Promise<void> {
    if (functionId === undefined) return;
    const ser = await serializeError(err, this.e.serializer, undefined);
    await this.write(functionId, { output: null, error: ser.value, serialization: ser.serialization });
  }

  private async write(functionId: number, outcome: Pick<HistoryStep, 'output' | 'error' | 'serialization'>): Promise<void> {
    await this.e.record(this.run!, {
      function_id: functionId,
      name: this.name,
      ...outcome,
      started_at_epoch_ms: this.startedAt,
      completed_at_epoch_ms: Date.now(),
    });
    this.end();
  }
}

interface StreamValue {
  offset: number;
  value: string | null;
  serialization?: string;
}

interface ReadParams {
  offset: number;
  timeoutMS: number | undefined;
  name: string;
  /** At most this many values per request (readStreamOffset needs one). */
  limit?: number;
}

/**
 * A stream's values in order from params.offset, until it is closed or its
 * writer has ended (the read loop of section 2.17). `giveUp` aborts a wait
 * in flight (a cancel_request): the reader was closed.
 */
async function* streamValues(
  e: Engine,
  workflowID: string,
  key: string,
  params: ReadParams,
  giveUp: AbortSignal,
): AsyncGenerator<unknown, void, undefined> {
  const checkpoints = new ReadCheckpoints(e, key, params.name);
  let offset = params.offset;
  const buffered: StreamValue[] = [];
  let complete = false;
  try {
    for (;;) {
      const functionId = checkpoints.begin();
      const recorded = await checkpoints.replay(functionId);
      if (recorded !== NOT_RECORDED) {
        checkpoints.end();
        if (recorded === DBOS_STREAM_CLOSED_SENTINEL) return;
        yield recorded;
        offset += 1;
        continue;
      }
      // The timeout is per value: its clock restarts with each value delivered.
      const deadline = params.timeoutMS !== undefined ? Date.now() + params.timeoutMS : undefined;
      while (buffered.length === 0 && !complete) {
        const body: Record<string, unknown> = { workflow_id: workflowID, key, offset, limit: params.limit };
        if (deadline !== undefined) {
          const remaining = deadline - Date.now();
          if (remaining <= 0) {
            const err = new DBOSStreamTimeoutError(workflowID, key, params.timeoutMS);
            await checkpoints.recordTimeout(functionId, err);
            throw err;
          }
          // 0 is "no limit" to the agent: the shortest wait is 1 ms.
          body.timeout_ms = Math.max(1, Math.ceil(remaining));
        }
        const reader = checkpoints.reader;
        const signal = reader ? AbortSignal.any([giveUp, reader.stop.signal]) : giveUp;
        let reply: Record<string, unknown>;
        try {
          reply = await e.request('read_stream', body, signal);
        } catch (err) {
          if (giveUp.aborted) return;
          reader?.throwIfStopped();
          if (isNotFound(err)) throw new DBOSNonExistentWorkflowError(`Workflow ${workflowID} does not exist`);
          throw err;
        }
        buffered.push(...((reply.values as StreamValue[] | undefined) ?? []));
        complete = reply.closed === true || reply.ended === true;
      }
      const next = buffered.shift();
      if (!next) {
        // The end is recorded too, so a replay stops exactly where this read did.
        await checkpoints.record(functionId, DBOS_STREAM_CLOSED_SENTINEL);
        return;
      }
      const value =
        next.value === DBOS_STREAM_CLOSED_SENTINEL
          ? DBOS_STREAM_CLOSED_SENTINEL // the legacy marker, stored unserialized
          : await readPayload(e, next.value, next.serialization);
      if (value === DBOS_STREAM_CLOSED_SENTINEL) {
        await checkpoints.record(functionId, DBOS_STREAM_CLOSED_SENTINEL);
        return;
      }
      // Recorded before it is yielded: a crash after the workflow acts on it still replays it.
      await checkpoints.record(functionId, value);
      yield value;
      offset = next.offset + 1;
    }
  } finally {
    checkpoints.end();
  }
}

/**
 * The generator DBOS.readStream gives: closing it (return, or a `break` out
 * of `for await`) also gives up a read the agent is waiting on.
 */
class StreamReader<T> implements AsyncGenerator<T, void, unknown> {
  private readonly giveUp = new AbortController();
  private readonly inner: AsyncGenerator<unknown, void, undefined>;

  constructor(start: (giveUp: AbortSignal) => AsyncGenerator<unknown, void, undefined>) {
    this.inner = start(this.giveUp.signal);
  }

  next(): Promise<IteratorResult<T, void>> {
    return this.inner.next() as Promise<IteratorResult<T, void>>;
  }

  return(value?: void | PromiseLike<void>): Promise<IteratorResult<T, void>> {
    this.giveUp.abort(new DBOSError('the stream reader was closed'));
    return this.inner.return(value as void) as Promise<IteratorResult<T, void>>;
  }

  throw(err: unknown): Promise<IteratorResult<T, void>> {
    this.giveUp.abort(new DBOSError('the stream reader was closed'));
    return this.inner.throw(err) as Promise<IteratorResult<T, void>>;
  }

  [Symbol.asyncIterator](): AsyncGenerator<T, void, unknown> {
    return this;
  }

  /** `await using reader = DBOS.readStream(...)` closes it at the block's end. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.return();
  }
}

export function readStream<T>(workflowID: string, key: string, options: ReadStreamOptions = {}): AsyncGenerator<T, void, unknown> {
  return new StreamReader<T>((giveUp) =>
    (async function* () {
      // Checked at the first read, as DBOS's generator checks them.
      const e = requireEngine('readStream');
      const { offset, timeoutMS } = resolveStreamOptions(options);
      yield* streamValues(e, workflowID, key, { offset, timeoutMS, name: READ_STREAM }, giveUp);
    })(),
  );
}

export async function readStreamOffset<T>(
  workflowID: string,
  key: string,
  offset: number,
  options: ReadStreamOffsetOptions = {},
): Promise<T> {
  const e = requireEngine('readStreamOffset');
  const resolved = resolveStreamOptions({ ...options, offset });
  const giveUp = new AbortController();
  for await (const value of streamValues(e, workflowID, key, { ...resolved, name: READ_STREAM_OFFSET, limit: 1 }, giveUp.signal)) {
    return value as T;
  }
  // The stream ended before this offset: no value will ever come.
  throw new DBOSStreamTimeoutError(workflowID, key);
}

// ---- durable sleep ---------------------------------------------------------------

export async function sleepms(durationMS: number): Promise<void> {
  if (!Number.isFinite(durationMS)) throw new DBOSError('sleep duration must be a finite number of milliseconds');
  const s = site();
  if (s.kind === 'workflow') {
    const run = s.run;
    // The id is taken even for a sleep of nothing, as DBOS takes it.
    const functionId = run.takeFunctionId();
    if (durationMS <= 0) return;
    const e = requireEngine();
    run.throwIfStopped();
    e.replayed(run, functionId, SLEEP);
    // Sent on replay too: the agent keeps the first wake time and answers what is left of it.
    const reply = await runRequest(e, run, 'sleep', { caller: caller(run, functionId), duration_ms: Math.ceil(durationMS) }, SLEEP, functionId);
    await sleepFor(Number(reply.remaining_ms ?? 0), run.stop.signal);
    run.throwIfStopped();
    return;
  }
  await sleepFor(durationMS, undefined);
}

/** Sleeps ms (longer than one timer allows, in pieces); a signal ends it early. */
async function sleepFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const end = Date.now() + ms;
  const stop = signal ?? new AbortController().signal;
  for (let left = ms; left > 0 && !stop.aborted; left = end - Date.now()) {
    await interruptibleSleep(Math.min(left, MAX_TIMER_MS), stop);
  }
}

// ---- patches ----------------------------------------------------------------------

function patchRun(api: string): RunState {
  const s = site();
  if (s.kind !== 'workflow') {
    throw new DBOSInvalidWorkflowTransitionError(`\`DBOS.${api}\` must be called from a workflow, and not within a step`);
  }
  if (!requireEngine().config.enablePatching) {
    throw new DBOSInvalidWorkflowTransitionError('Patching is not enabled.  See `enablePatching` in `DBOSConfig`');
  }
  return s.run;
}

/**
 * Whether this run takes the patched path (section 2.19): the marker
 * `DBOS.patch-<name>` at the next id, or nothing recorded there yet (then
 * the marker is recorded). Another step there: the run predates the patch.
 */
export async function patch(patchName: string): Promise<boolean> {
  const run = patchRun('patch');
  const e = requireEngine();
  const name = `DBOS.patch-${patchName}`;
  const functionId = run.nextFunctionId;
  const recorded = run.history.get(functionId);
  if (recorded) {
    if (recorded.name !== name) return false;
    run.takeFunctionId();
    return true;
  }
  run.takeFunctionId();
  const now = Date.now();
  await e.record(run, { function_id: functionId, name, output: null, error: null, started_at_epoch_ms: now, completed_at_epoch_ms: now });
  return true;
}

/** Always the patched path; takes the next id only when the marker of `patch(name)` is recorded there. */
export async function deprecatePatch(patchName: string): Promise<boolean> {
  const run = patchRun('deprecatePatch');
  if (run.history.get(run.nextFunctionId)?.name === `DBOS.patch-${patchName}`) run.takeFunctionId();
  return true;
}
