/**
 * `DBOSClient`: DBOS TypeScript 5.x's client, for code outside a DBOS
 * application (a web handler that enqueues work, an operator's tool). It is
 * a connection of role `client` (PROTOCOL.md section 2.1): its own link to
 * the agent, with no workflows and no pushes. Where DBOS TypeScript's client
 * opens a pool on the system database, this one reaches it through the
 * agent; the options DBOS TypeScript takes are accepted as they are, and the
 * agent's transport is chosen as DBOS.launch chooses it (`agentSocket`,
 * `agentLibrary`, ..., or the environment).
 *
 * Management and status go through the functions of management.ts and
 * runtime.ts that DBOS.* uses too; only the connection differs.
 */
import { randomUUID } from 'node:crypto';
import { AgentLink } from './connection';
import { DBOSError, DBOSInvalidWorkflowTransitionError, DBOSStreamTimeoutError } from './error';
import type { DLogger } from './logger';
import * as mgmt from './management';
import { PROTOCOL_VERSION, WAKE_TIME_FORMAT } from './protocol';
import { BINDING_VERSION, Requester, WorkflowResult, fetchStatus, mapError, outcomeOf } from './runtime';
import { DBOSJSON, DBOSPortableJSON, DBOSSerializer, deserializeValue, serializeArgs, serializeValue } from './serialization';
import { resolveEndpoint } from './transport';
import type {
  DuplicationPolicy,
  PollingOptions,
  WorkflowHandle,
  WorkflowIDReusePolicy,
  WorkflowSerializationFormat,
  WorkflowStatus,
} from './types';

/**
 * A workflow to enqueue by name, without its function: it may be served by
 * another process, or written in another language (DBOS TypeScript's
 * EnqueueWorkflowOptions).
 */
export interface EnqueueWorkflowOptions {
  queueName: string;
  workflowName: string;
  workflowClassName?: string;
  workflowConfigName?: string;
  workflowID?: string;
  workflowIDReusePolicy?: WorkflowIDReusePolicy;
  /** The version that may run it; unset, the latest version's workers take it. */
  appVersion?: string;
  /** Its timeout, from when it is dequeued. */
  workflowTimeoutMS?: number;
  deduplicationID?: string;
  serializationType?: WorkflowSerializationFormat;
  priority?: number;
  queuePartitionKey?: string;
  delaySeconds?: number;
  attributes?: Record<string, unknown>;
  authenticatedUser?: string;
  authenticatedRoles?: string[];
  /** The application that owns and runs it; default the enqueuer's. */
  applicationName?: string;
}

/** DBOSClient.enqueue's options: EnqueueWorkflowOptions and what a held deduplication id gets. */
export interface ClientEnqueueOptions extends EnqueueWorkflowOptions {
  duplicationPolicy?: DuplicationPolicy;
}

export interface ClientSendOptions {
  serializationType?: WorkflowSerializationFormat;
}

export interface ClientGetEventOptions extends PollingOptions {
  timeoutSeconds?: number;
  deadlineEpochMS?: number;
}

export interface ClientReadStreamOptions extends PollingOptions {
  offset?: number;
  /** How long to wait for each value, in seconds; unset, without limit. */
  timeoutSeconds?: number;
}

/** DBOSClient.create's options: DBOS TypeScript's, and this binding's choice of transport. */
export interface DBOSClientConfig {
  systemDatabaseUrl?: string;
  systemDatabasePool?: unknown;
  serializer?: DBOSSerializer;
  systemDatabaseSchemaName?: string;
  systemDatabasePoolSize?: number;
  systemDatabasePollingConcurrency?: number;
  logger?: DLogger;
  applicationName?: string;
  observabilityQueryTimeoutMs?: number;
  systemDatabaseIdleTransactionTimeoutMs?: number;
  /** This binding's: the agent's socket (else DBOS_AGENT_SOCKET, else the default path). */
  agentSocket?: string;
  /** This binding's: libdbos.so's path (else DBOS_AGENT_LIBRARY): the library transport. */
  agentLibrary?: string;
  /** This binding's: the library's mode, embedded | sidecar | connect (else DBOS_AGENT_MODE). */
  agentMode?: 'embedded' | 'sidecar' | 'connect';
  /** This binding's: uids besides this process's and root's that may serve the socket. */
  agentTrustedUids?: number[];
}

/** Workflow attributes as the JSON text the agent stores, checked with DBOS TypeScript's rules and messages. */
export function workflowAttributesJSON(attributes: unknown): string | undefined {
  if (attributes === undefined || attributes === null) return undefined;
  if (typeof attributes !== 'object' || Array.isArray(attributes)) {
    throw new DBOSError(`Invalid workflow attributes: must be a key-value object, got ${Array.isArray(attributes) ? 'array' : typeof attributes}.`);
  }
  let text: string;
  try {
    text = JSON.stringify(attributes);
  } catch (e) {
    throw new DBOSError(`Invalid workflow attributes: must be JSON-serializable. ${(e as Error).message}`);
  }
  // JSON drops functions and undefined values: an object of nothing else is refused, not stored empty.
  if (text === '{}' && Object.keys(attributes).length > 0) {
    throw new DBOSError('Invalid workflow attributes: object has no JSON-serializable properties.');
  }
  return text;
}

/**
 * The `start_workflow` request that enqueues a workflow by name, checked as
 * DBOS TypeScript checks it (attributes, priority, the id). namedArgs need
 * the portable format, as in DBOS.
 */
export async function enqueueRequest(
  options: ClientEnqueueOptions,
  serializer: DBOSSerializer,
  positionalArgs: unknown[],
  namedArgs?: Record<string, unknown>,
  defaultFormat?: WorkflowSerializationFormat,
): Promise<Record<string, unknown>> {
  const attributes = workflowAttributesJSON(options.attributes);
  if (options.priority !== undefined) mgmt.checkPriority(options.priority);
  if (options.workflowID !== undefined && options.workflowID.trim() === '') {
    throw new DBOSError(`Invalid workflow ID '${options.workflowID}': workflow IDs must be non-empty and cannot be only whitespace.`);
  }
  if (options.duplicationPolicy === 'return-existing' && !options.deduplicationID) {
    throw new DBOSInvalidWorkflowTransitionError("`duplicationPolicy: 'return-existing'` requires `deduplicationID`");
  }
  const format = options.serializationType ?? defaultFormat;
  let inputs: { value: string | null; serialization: string };
  if (format === 'portable') {
    inputs = { value: await DBOSPortableJSON.stringify({ positionalArgs, namedArgs }), serialization: DBOSPortableJSON.name() };
  } else if (namedArgs) {
    throw new TypeError(`Serialization format '${format}' does not currently support named args.`);
  } else {
    inputs = await serializeArgs(positionalArgs, serializer, format);
  }
  return {
    workflow_id: options.workflowID ?? randomUUID(),
    name: options.workflowName,
    class_name: options.workflowClassName || undefined,
    config_name: options.workflowConfigName || undefined,
    queue_name: options.queueName,
    inputs: inputs.value,
    serialization: inputs.serialization,
    priority: options.priority,
    deduplication_id: options.deduplicationID,
    deduplication_policy: options.duplicationPolicy === 'return-existing' ? 'return_existing' : undefined,
    workflow_id_reuse_policy: options.workflowIDReusePolicy,
    partition_key: options.queuePartitionKey,
    delay_ms: options.delaySeconds !== undefined && options.delaySeconds > 0 ? Math.round(options.delaySeconds * 1000) : undefined,
    timeout_ms: options.workflowTimeoutMS !== undefined ? Math.round(options.workflowTimeoutMS) : undefined,
    app_version: options.appVersion,
    authenticated_user: options.authenticatedUser || undefined,
    authenticated_roles: options.authenticatedRoles?.length ? options.authenticatedRoles : undefined,
    attributes,
    application_name: options.applicationName,
  };
}

/** A client's connection as management.ts sees it. */
class ClientRequester implements Requester {
  constructor(
    readonly link: AgentLink,
    readonly serializer: DBOSSerializer,
    readonly appName: string | undefined,
  ) {}

  async request(op: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>> {
    try {
      return await this.link.request(op, body, { signal });
    } catch (err) {
      throw mapError(err, body);
    }
  }
}

/** A handle on a workflow, read through a client's connection. */
export class ClientHandle<R> implements WorkflowHandle<R> {
  constructor(
    private readonly req: Requester,
    readonly workflowID: string,
  ) {}

  getStatus(): Promise<WorkflowStatus | null> {
    return fetchStatus(this.req, this.workflowID);
  }

  /** The outcome; a workflow that does not exist yet is waited for, as DBOS waits. */
  async getResult(_options?: PollingOptions): Promise<R> {
    const result = await this.req.request('get_result', { workflow_id: this.workflowID, wait_for_creation: true });
    return outcomeOf<R>(result as unknown as WorkflowResult, this.req.serializer);
  }
}

export class DBOSClient {
  readonly serializer: DBOSSerializer;
  readonly #req: ClientRequester;

  private constructor(req: ClientRequester) {
    this.#req = req;
    this.serializer = req.serializer;
  }

  /** Connects to the agent (and fails at once when it cannot be reached). */
  static async create(config: DBOSClientConfig): Promise<DBOSClient> {
    const serializer = config.serializer ?? DBOSJSON;
    const appName = config.applicationName || undefined;
    const link = new AgentLink({
      endpoint: resolveEndpoint({
        agentSocket: config.agentSocket,
        agentLibrary: config.agentLibrary,
        agentMode: config.agentMode,
        systemDatabaseUrl: config.systemDatabaseUrl,
        trustedUids: config.agentTrustedUids,
      }),
      hello: () => ({
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        role: 'client',
        app_name: appName,
        language: 'node',
        binding_version: BINDING_VERSION,
        pid: process.pid,
        wake_time_format: WAKE_TIME_FORMAT,
      }),
      onRetry: (err, attempt) => {
        if (attempt === 1 || attempt % 20 === 0) {
          const msg = `dbos-agent: client reconnecting (attempt ${attempt}): ${err.message}`;
          if (config.logger) config.logger.warn(msg);
          else console.warn(msg);
        }
      },
    });
    await link.open();
    return new DBOSClient(new ClientRequester(link, serializer, appName));
  }

  /** The application this client acts for; undefined when it writes unclaimed rows. */
  get applicationName(): string | undefined {
    return this.#req.appName;
  }

  async destroy(): Promise<void> {
    this.#req.link.close();
  }

  // ---- enqueueing ------------------------------------------------------------

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async enqueue<T extends (...args: any[]) => Promise<any>>(
    options: ClientEnqueueOptions,
    ...args: Parameters<T>
  ): Promise<WorkflowHandle<Awaited<ReturnType<T>>>> {
    return this.#enqueue(await enqueueRequest(this.#owned(options), this.serializer, args));
  }

  /** Enqueues a workflow that may be written in another language: portable arguments, named ones too. */
  async enqueuePortable<T = unknown>(
    options: ClientEnqueueOptions,
    positionalArgs: unknown[],
    namedArgs?: { [key: string]: unknown },
  ): Promise<WorkflowHandle<T>> {
    return this.#enqueue(await enqueueRequest(this.#owned(options), this.serializer, positionalArgs, namedArgs, 'portable'));
  }

  #owned(options: ClientEnqueueOptions): ClientEnqueueOptions {
    return { ...options, applicationName: options.applicationName ?? this.#req.appName };
  }

  async #enqueue<R>(body: Record<string, unknown>): Promise<WorkflowHandle<R>> {
    const reply = await this.#req.request('start_workflow', body);
    return new ClientHandle<R>(this.#req, reply.workflow_id as string);
  }

  // ---- messages, events, streams ---------------------------------------------

  async send<T>(destinationID: string, message: T, topic?: string, idempotencyKey?: string, options?: ClientSendOptions): Promise<void> {
    const ser = await serializeValue(message, this.serializer, options?.serializationType);
    await this.#req.request('send', {
      messages: [
        {
          destination_id: destinationID,
          topic: topic ?? null,
          message: ser.value,
          serialization: ser.serialization,
          idempotency_key: idempotencyKey,
        },
      ],
    });
  }

  /** The event's value; null when it is not set within the timeout (60 s by default, as in DBOS). */
  async getEvent<T>(workflowID: string, key: string, options?: number | ClientGetEventOptions): Promise<T | null> {
    const timeoutSeconds =
      typeof options === 'number'
        ? options
        : options?.deadlineEpochMS !== undefined
          ? Math.max(0, (options.deadlineEpochMS - Date.now()) / 1000)
          : options?.timeoutSeconds;
    const reply = await this.#req.request('get_event', {
      workflow_id: workflowID,
      key,
      timeout_ms: Math.round((timeoutSeconds ?? 60) * 1000),
    });
    const value = reply.value as string | null | undefined;
    if (value === null || value === undefined) return null;
    return (await deserializeValue(value, (reply.serialization as string | undefined) ?? null, this.serializer)) as T;
  }

  /** The stream's values in order, until it is closed or its writer ends. */
  readStream<T>(workflowID: string, key: string, options: ClientReadStreamOptions = {}): AsyncGenerator<T, void, unknown> {
    return readStreamValues<T>(this.#req, workflowID, key, streamOffset(options.offset), streamTimeoutMS(options.timeoutSeconds));
  }

  /** The value at one offset, waited for; DBOSStreamTimeoutError when it does not come. */
  async readStreamOffset<T>(workflowID: string, key: string, offset: number, options: Omit<ClientReadStreamOptions, 'offset'> = {}): Promise<T> {
    const timeoutMS = streamTimeoutMS(options.timeoutSeconds);
    for await (const value of readStreamValues<T>(this.#req, workflowID, key, streamOffset(offset), timeoutMS, 1)) return value;
    throw new DBOSStreamTimeoutError(workflowID, key, undefined);
  }

  // ---- handles and status ----------------------------------------------------

  retrieveWorkflow<T = unknown>(workflowID: string): WorkflowHandle<Awaited<T>> {
    return new ClientHandle<Awaited<T>>(this.#req, workflowID);
  }

  getWorkflow(workflowID: string): Promise<WorkflowStatus | undefined> {
    return mgmt.getWorkflow(this.#req, workflowID);
  }

  async waitFirst(handles: WorkflowHandle<unknown>[], _options?: PollingOptions): Promise<WorkflowHandle<unknown>> {
    if (handles.length === 0) throw new Error('handles must not be empty');
    const byID = new Map<string, WorkflowHandle<unknown>>();
    for (const h of handles) {
      if (byID.has(h.workflowID)) throw new Error(`Duplicate workflow ID in waitFirst: ${h.workflowID}`);
      byID.set(h.workflowID, h);
    }
    const abort = new AbortController();
    try {
      const first = await Promise.race(
        [...byID.keys()].map((id) => this.#req.request('get_result', { workflow_id: id, wait_for_creation: true }, abort.signal).then(() => id)),
      );
      return byID.get(first)!;
    } finally {
      abort.abort(new Error('waitFirst: another workflow ended first'));
    }
  }

  async waitAll<R>(handles: WorkflowHandle<R>[], _options?: PollingOptions): Promise<WorkflowHandle<R>[]> {
    const ids = [...new Set(handles.map((h) => h.workflowID))];
    await Promise.all(ids.map((id) => this.#req.request('get_result', { workflow_id: id, wait_for_creation: true })));
    return handles;
  }

  // ---- management (management.ts) --------------------------------------------

  cancelWorkflow(workflowID: string, options?: mgmt.CancelWorkflowsOptions): Promise<void> {
    return mgmt.cancelWorkflows(this.#req, [workflowID], options);
  }

  cancelWorkflows(workflowIDs: string[], options?: mgmt.CancelWorkflowsOptions): Promise<void> {
    return mgmt.cancelWorkflows(this.#req, workflowIDs, options);
  }

  async resumeWorkflow<T = unknown>(workflowID: string, options?: { queueName?: string }): Promise<WorkflowHandle<Awaited<T>>> {
    const [handle] = await this.resumeWorkflows<T>([workflowID], options);
    return handle;
  }

  async resumeWorkflows<T = unknown>(workflowIDs: string[], options?: { queueName?: string }): Promise<WorkflowHandle<Awaited<T>>[]> {
    await mgmt.resumeWorkflows(this.#req, workflowIDs, options?.queueName);
    return workflowIDs.map((id) => this.retrieveWorkflow<T>(id));
  }

  setWorkflowPriority(workflowID: string, priority: number): Promise<void> {
    return mgmt.setWorkflowPriority(this.#req, workflowID, priority);
  }

  async setWorkflowDelay(workflowID: string, options: number | mgmt.SetWorkflowDelayOptions): Promise<void> {
    await mgmt.setWorkflowDelay(this.#req, workflowID, mgmt.resolveDelayEpochMS(options));
  }

  deleteWorkflow(workflowID: string, deleteChildren = false): Promise<void> {
    return mgmt.deleteWorkflows(this.#req, [workflowID], deleteChildren);
  }

  deleteWorkflows(workflowIDs: string[], deleteChildren = false): Promise<void> {
    return mgmt.deleteWorkflows(this.#req, workflowIDs, deleteChildren);
  }

  /** Forks a workflow; gives the fork's id (DBOS TypeScript's client gives the id, not a handle). */
  forkWorkflow(workflowID: string, startStep: number, options?: mgmt.ForkWorkflowOptions): Promise<string> {
    return mgmt.forkWorkflow(this.#req, workflowID, startStep, options);
  }

  async rewindWorkflow<T = unknown>(workflowID: string, options?: mgmt.RewindWorkflowOptions): Promise<WorkflowHandle<Awaited<T>>> {
    await mgmt.rewindWorkflow(this.#req, workflowID, options);
    return this.retrieveWorkflow<T>(workflowID);
  }

  listWorkflows(input: mgmt.GetWorkflowsInput): Promise<WorkflowStatus[]> {
    return mgmt.listWorkflows(this.#req, input);
  }

  listQueuedWorkflows(input: mgmt.GetWorkflowsInput): Promise<WorkflowStatus[]> {
    return mgmt.listQueuedWorkflows(this.#req, input);
  }

  listWorkflowSteps(workflowID: string, options?: mgmt.ListWorkflowStepsOptions): Promise<mgmt.StepInfo[] | undefined> {
    return mgmt.listWorkflowSteps(this.#req, workflowID, options);
  }

  listApplicationVersions(): Promise<mgmt.VersionInfo[]> {
    return mgmt.listApplicationVersions(this.#req);
  }

  getLatestApplicationVersion(): Promise<mgmt.VersionInfo> {
    return mgmt.getLatestApplicationVersion(this.#req);
  }

  setLatestApplicationVersion(versionName: string, options?: { applicationName?: string }): Promise<void> {
    return mgmt.setLatestApplicationVersion(this.#req, versionName, options);
  }
}

function streamOffset(offset: number | undefined): number {
  const o = offset ?? 0;
  if (!Number.isInteger(o) || o < 0) throw new DBOSError('offset must be a non-negative integer');
  return o;
}

function streamTimeoutMS(timeoutSeconds: number | undefined): number | undefined {
  if (timeoutSeconds === undefined) return undefined;
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds < 0) throw new DBOSError('timeoutSeconds must not be negative');
  return timeoutSeconds * 1000;
}

/**
 * Reads a stream with `read_stream` (section 2.17), not recorded: values
 * from offset until the closing marker or the writer's end; a wait past
 * timeoutMS for the next value is DBOSStreamTimeoutError. At most `count`
 * values when given.
 */
export async function* readStreamValues<T>(
  req: Requester,
  workflowID: string,
  key: string,
  offset: number,
  timeoutMS: number | undefined,
  count?: number,
): AsyncGenerator<T, void, unknown> {
  let next = offset;
  let left = count ?? Number.POSITIVE_INFINITY;
  for (;;) {
    const reply = await req.request('read_stream', {
      workflow_id: workflowID,
      key,
      offset: next,
      limit: Number.isFinite(left) ? Math.min(left, 1000) : undefined,
      timeout_ms: timeoutMS !== undefined ? Math.max(1, Math.round(timeoutMS)) : undefined,
    });
    const values = (reply.values as Array<{ offset: number; value: string; serialization?: string }> | undefined) ?? [];
    for (const v of values) {
      yield (await deserializeValue(v.value, v.serialization ?? null, req.serializer)) as T;
      next = v.offset + 1;
      if (--left <= 0) return;
    }
    if (reply.closed || reply.ended) return;
    if (values.length === 0) throw new DBOSStreamTimeoutError(workflowID, key, timeoutMS);
  }
}
