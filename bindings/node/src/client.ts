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
import * as queues from './queues';
import * as sched from './schedules';
import { BINDING_VERSION, INTERNAL_QUEUE_NAME, Requester, WorkflowResult, fetchStatus, mapError, outcomeOf } from './runtime';
import { DBOSJSON, DBOSPortableJSON, DBOSSerializer, deserializeValue, serializeArgs, serializeValue } from './serialization';
import { resolveEndpoint } from './transport';
import type {
  ApplicationRowCounts,
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
  readonly role = 'client' as const;

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

  // ---- debouncing (DebouncerClient's calls) ----------------------------------

  /**
   * Enqueues a debounced workflow for DebouncerClient: DELAYED for
   * `delaySeconds`, released no later than debounceDeadlineEpochMS, holding
   * its deduplicationID on its queue. Gives the id of the workflow that will
   * run: the agent's debounce_workflow creates it, or (when the key was taken
   * meanwhile by a pending debounce) pushes that one back with these
   * arguments, which is where DBOS's DebouncerClient lands after its retry.
   */
  async enqueueDebounced(options: ClientEnqueueOptions, debounceDeadlineEpochMS: number | undefined, args: unknown[]): Promise<string> {
    const owned = this.#owned(options);
    if (!owned.deduplicationID) throw new DBOSError('enqueueDebounced needs the debounce key as deduplicationID');
    const start = await enqueueRequest(owned, this.serializer, args);
    // The agent's default queue for a debounce is the internal one.
    if (start.queue_name === INTERNAL_QUEUE_NAME) delete start.queue_name;
    const reply = await this.#req.request('debounce_workflow', {
      ...debounceFields(start),
      key: owned.deduplicationID,
      delay_ms: start.delay_ms ?? 0,
      timeout_ms: debounceDeadlineEpochMS !== undefined ? Math.max(1, Math.round(debounceDeadlineEpochMS - Date.now())) : undefined,
    });
    return reply.workflow_id as string;
  }

  /**
   * Pushes back the pending (DELAYED) debounced workflow holding the key on
   * its queue, with new arguments (DBOS's debounceDelayedWorkflow): the
   * result names it, or the holder when that is not a pending debounce, or
   * nothing when the key is free.
   */
  async debounceDelayedWorkflow(params: DebounceParams): Promise<DebounceResult> {
    const holders = await mgmt.listWorkflows(this.#req, {
      queueName: params.queueName,
      status: ['DELAYED', 'ENQUEUED', 'PENDING'],
      applicationName: params.applicationName ?? this.#req.appName,
      loadInput: false,
      loadOutput: false,
    });
    const holder = holders.find((h) => h.deduplicationID === params.deduplicationID);
    const free: DebounceResult = {
      bouncedWorkflowID: null,
      holderWorkflowID: null,
      holderIsDebounced: false,
      holderWorkflowName: null,
      holderWorkflowClassName: null,
      holderApplicationName: null,
    };
    if (!holder) return free;
    const pending = holder.status === 'DELAYED' && holder.workflowName === params.workflowName && (holder.workflowClassName ?? '') === params.workflowClassName;
    if (!pending) {
      return {
        ...free,
        holderWorkflowID: holder.workflowID,
        holderWorkflowName: holder.workflowName,
        holderWorkflowClassName: holder.workflowClassName ?? '',
        holderApplicationName: holder.applicationName ?? null,
      };
    }
    const reply = await this.#req.request('debounce_workflow', {
      key: params.deduplicationID,
      deduplication_id: params.deduplicationID,
      name: params.workflowName,
      class_name: params.workflowClassName || undefined,
      queue_name: params.queueName,
      delay_ms: Math.max(0, Math.round(params.delayUntilEpochMS - Date.now())),
      inputs: params.input,
      serialization: params.serialization ?? undefined,
      application_name: params.applicationName ?? this.#req.appName,
    });
    return { ...free, bouncedWorkflowID: reply.workflow_id as string };
  }

  // ---- queues (queues.ts) ----------------------------------------------------

  /**
   * Registers a queue and stores its options (default onConflict
   * always_update: a client has no version); it belongs to applicationName,
   * default the client's. The queue's setters write through this client.
   */
  registerQueue(name: string, options?: queues.RegisterQueueOptions & { applicationName?: string }): Promise<queues.WorkflowQueue> {
    return queues.clientRegisterQueue(this.#req, name, options);
  }

  /** The stored queue, or null when it has no row. */
  retrieveQueue(name: string): Promise<queues.WorkflowQueue | null> {
    return queues.retrieveWith(this.#queueHost(), name);
  }

  /** Deletes a queue's row (its pending workflows stay, unserved). */
  deleteQueue(name: string): Promise<void> {
    return queues.deleteWith(this.#req, name);
  }

  /** The stored queues of these applications (default the client's) and the unclaimed ones. */
  listQueues(applicationName?: string | string[]): Promise<queues.WorkflowQueue[]> {
    return queues.listWith(this.#queueHost(), applicationName);
  }

  #queueHost(): queues.QueueHost {
    return queues.clientQueueHost(this.#req, this.#req.appName);
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

  /**
   * Gives newName the rows oldName owns, the unclaimed ones, or both. Stop
   * the renamed application's workers first.
   */
  renameApplication(
    oldName: string | undefined,
    newName: string,
    options?: { batchSize?: number | null; adoptUnclaimedRows?: boolean },
  ): Promise<ApplicationRowCounts> {
    return mgmt.renameApplication(this.#req, oldName, newName, options);
  }

  // ---- schedules (schedules.ts) ----------------------------------------------

  /** Creates a schedule of a workflow named; it belongs to applicationName, default the client's. */
  async createSchedule(options: {
    scheduleName: string;
    workflowName: string;
    workflowClassName?: string;
    schedule: string;
    context?: unknown;
    options?: sched.ScheduleOptions;
    applicationName?: string;
  }): Promise<void> {
    const { options: opts, ...def } = options;
    await sched.createScheduleWith(this.#req, { ...def, ...opts, applicationName: def.applicationName ?? this.#req.appName });
  }

  /** The schedules of these applications (default the client's, with the unclaimed ones), filtered. */
  listSchedules(filters?: sched.ScheduleFilters): Promise<sched.WorkflowSchedule[]> {
    return sched.listSchedulesWith(this.#req, filters);
  }

  getSchedule(name: string): Promise<sched.WorkflowSchedule | null> {
    return sched.getScheduleWith(this.#req, name);
  }

  deleteSchedule(name: string): Promise<void> {
    return sched.onScheduleWith(this.#req, 'delete_schedule', name);
  }

  pauseSchedule(name: string): Promise<void> {
    return sched.onScheduleWith(this.#req, 'pause_schedule', name);
  }

  resumeSchedule(name: string): Promise<void> {
    return sched.onScheduleWith(this.#req, 'resume_schedule', name);
  }

  /** Changes the given fields of a schedule's definition, keeping its status and last_fired_at. */
  async updateSchedule(name: string, updates: sched.ScheduleUpdates): Promise<void> {
    if (!(await sched.updateScheduleWith(this.#req, name, updates))) throw new DBOSError(`Schedule '${name}' not found`);
  }

  /** Creates the missing schedules and brings the others' definitions up to date. */
  applySchedules(schedules: sched.NamedScheduleDefinition[]): Promise<void> {
    return sched.applySchedulesWith(
      this.#req,
      schedules.map((s) => ({ ...s, applicationName: s.applicationName ?? this.#req.appName })),
    );
  }

  /** Enqueues one run of the schedule's workflow now. */
  async triggerSchedule(name: string): Promise<WorkflowHandle<unknown>> {
    return this.retrieveWorkflow(await sched.triggerScheduleWith(this.#req, name));
  }

  /** Enqueues the schedule's ticks between start and end that were not enqueued yet; a handle on each tick. */
  async backfillSchedule(name: string, start: Date, end: Date): Promise<WorkflowHandle<unknown>[]> {
    return (await sched.backfillScheduleWith(this.#req, name, start, end)).map((id) => this.retrieveWorkflow(id));
  }
}

/** DBOS's parameters of debounceDelayedWorkflow. */
export interface DebounceParams {
  workflowName: string;
  workflowClassName: string;
  queueName: string;
  deduplicationID: string;
  delayUntilEpochMS: number;
  input: string | null;
  serialization: string | null;
  applicationName?: string;
}

/** DBOS's DebounceResult: the workflow pushed back, or the key's holder when it is not a pending debounce. */
export interface DebounceResult {
  bouncedWorkflowID: string | null;
  holderWorkflowID: string | null;
  holderIsDebounced: boolean;
  holderWorkflowName: string | null;
  holderWorkflowClassName: string | null;
  holderApplicationName: string | null;
}

/** The fields of a start_workflow request that a debounce_workflow's first call takes too. */
function debounceFields(start: Record<string, unknown>): Record<string, unknown> {
  const keep = [
    'workflow_id', 'name', 'class_name', 'queue_name', 'inputs', 'serialization', 'deduplication_id', 'app_version',
    'authenticated_user', 'authenticated_roles', 'attributes', 'application_name',
  ];
  const body: Record<string, unknown> = Object.fromEntries(keep.filter((k) => start[k] !== undefined).map((k) => [k, start[k]]));
  if (start.timeout_ms !== undefined) body.workflow_timeout_ms = start.timeout_ms;
  return body;
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
