/**
 * Workflow queues: DBOS TypeScript 5.x's database-backed queues
 * (`DBOS.registerQueue` and its siblings) and 4.x's `new WorkflowQueue(name,
 * options)`, both kept by the agent as rows of the shared `queues` table.
 *
 * A queue this process declares is served by its worker: those declared
 * before launch go in the `hello`, later ones in a `register_queues`
 * (PROTOCOL.md section 2.10). `DBOSConfig.listenQueues` narrows what is
 * served: a declared queue outside it is stored with `configure_only`. The
 * agent has no "update a queue" op, so a setter re-registers the queue with
 * every option as stored plus the change: an options registration
 * overwrites the row, which is what DBOS's setters do.
 *
 * Each operation is written once, over a `Requester` (runtime.ts): the
 * worker's engine for DBOS.*, a client's connection for DBOSClient. A queue
 * read through a client writes its setters through that client, as DBOS
 * TypeScript's client-bound queues do.
 *
 * Which queues a worker dequeues, as DBOS TypeScript 5.x: every queue of its
 * application stored in the database (its own declarations and those of any
 * other process or client), narrowed by `listenQueues`, and the internal
 * queue. The stored rows are read again every second, as DBOS re-reads them,
 * and a queue this process did not declare is subscribed to by name.
 */
import type { EnqueueWorkflowOptions } from './client';
import { currentContext } from './context';
import { requireEngine, maybeEngine, DBOS_QUEUE_MAX_PRIORITY, DBOS_QUEUE_MIN_PRIORITY } from './dbos';
import { DBOSAgentUnavailableError, DBOSError, DBOSInvalidQueuePriorityError, DBOSInvalidWorkflowTransitionError } from './error';
import type { FunctionRegistration } from './registry';
import type { Requester } from './runtime';
import type { DBOSConfig, WorkflowHandle, WorkflowIDReusePolicy, WorkflowSerializationFormat } from './types';
import { AgentWorkflowHandle } from './workflow';

/** Queue names DBOS keeps for itself. */
export const RESERVED_QUEUE_NAME_PREFIX = '_dbos_';

export interface QueueRateLimit {
  /** Number of queue dispatches per `periodSec`. */
  limitPerPeriod: number;
  /** Period of time during which `limitPerPeriod` queued workflows may be dispatched. */
  periodSec: number;
}

export interface QueueParameters {
  /** Most of the queue's workflows this process runs at once. */
  workerConcurrency?: number;
  /** Most of the queue's workflows running at once, across every executor. */
  globalConcurrency?: number;
  rateLimit?: QueueRateLimit;
  partitionConcurrency?: number;
  partitionWorkerConcurrency?: number;
  partitionRateLimit?: QueueRateLimit;
  /** Stored for the DBOS SDKs' pollers (the agent is woken by notifications). */
  minPollingIntervalMs?: number;
  /** @deprecated Use `globalConcurrency`. */
  concurrency?: number;
}

/** DBOS TypeScript 4.x's options of `new WorkflowQueue`, two of which 5.x removed. */
export interface LegacyQueueParameters extends QueueParameters {
  /** @deprecated every queue dispatches in priority order. */
  priorityEnabled?: boolean;
  /** @deprecated set a partition limit instead. */
  partitionQueue?: boolean;
}

export type QueueConflictResolution = 'update_if_latest_version' | 'always_update' | 'never_update';

export interface RegisterQueueOptions extends QueueParameters {
  onConflict?: QueueConflictResolution;
}

/** A `QueueRegistration` of the protocol (section 6). */
interface QueueRegistration {
  name: string;
  concurrency?: number;
  worker_concurrency?: number;
  rate_limit_max?: number;
  rate_limit_period_sec?: number;
  priority_enabled?: boolean;
  partition_queue?: boolean;
  partition_concurrency?: number;
  partition_worker_concurrency?: number;
  partition_rate_limit_max?: number;
  partition_rate_limit_period_sec?: number;
  polling_interval_sec?: number;
  configure_only?: boolean;
}

/** A `QueueInfo` reply (get_queue, list_queues). */
interface QueueInfo {
  name: string;
  registered: boolean;
  concurrency?: number;
  worker_concurrency?: number;
  rate_limit_max?: number;
  rate_limit_period_sec?: number;
  priority_enabled?: boolean;
  partition_queue?: boolean;
  partition_concurrency?: number;
  partition_worker_concurrency?: number;
  partition_rate_limit_max?: number;
  partition_rate_limit_period_sec?: number;
  polling_interval_sec?: number;
  application_name?: string;
}

/**
 * What this process announces for each queue it declared: the full options
 * of a queue whose configuration its code owns (4.x's constructor), or the
 * bare name of one it only serves as stored (5.x's registerQueue wrote the
 * row once; a reconnection must not write it again).
 */
const declared = new Map<string, QueueRegistration>();
/**
 * Stored queues this process serves without having declared them (found in
 * the database), on the current connection: a new connection's hello does
 * not carry them, so a queue deleted meanwhile is not created again, and the
 * next reading of the rows subscribes again.
 */
const subscribed = new Set<string>();
let configSource: () => DBOSConfig | undefined = () => undefined;

/** How often the stored queues are read again (DBOS TypeScript's reconcile interval). */
export const QUEUE_RECONCILE_MS = 1000;

/** Called once by dbos.ts: the configuration and the hello hook, without an import cycle at load. */
export function installQueues(hooks: {
  config: () => DBOSConfig | undefined;
  addHelloContributor: (c: { hello(body: Record<string, unknown>): void }) => void;
}): void {
  configSource = hooks.config;
  hooks.addHelloContributor({
    hello(body) {
      subscribed.clear();
      if (declared.size === 0) return;
      body.queues = [...declared.values()].map(forThisWorker);
    },
  });
}

let reconciler: { timer: NodeJS.Timeout; running?: Promise<void> } | undefined;

/**
 * At launch: serves the stored queues of the application that listenQueues
 * keeps, now and as they are registered later (by a client, another
 * process), until stopQueueReconciler.
 */
export async function startQueueReconciler(): Promise<void> {
  stopQueueReconciler();
  await reconcileStoredQueues().catch((err: Error) => console.warn(`dbos-agent: could not read the stored queues: ${err.message}`));
  const timer = setInterval(() => {
    if (!reconciler || reconciler.running) return;
    reconciler.running = reconcileStoredQueues()
      .catch((err: Error) => {
        // While the agent is away the link reconnects, and the next reading catches up.
        if (maybeEngine() && !(err instanceof DBOSAgentUnavailableError)) console.warn(`dbos-agent: could not read the stored queues: ${err.message}`);
      })
      .finally(() => {
        if (reconciler) reconciler.running = undefined;
      });
  }, QUEUE_RECONCILE_MS);
  timer.unref();
  reconciler = { timer };
}

export function stopQueueReconciler(): void {
  if (reconciler) clearInterval(reconciler.timer);
  reconciler = undefined;
}

/** Subscribes to every stored queue of the application this process listens to and does not serve yet. */
async function reconcileStoredQueues(): Promise<void> {
  const e = maybeEngine();
  if (!e) return;
  const infos = await listQueueInfos(e, e.appName ? [e.appName] : undefined);
  const fresh = infos.map((q) => q.name).filter((n) => listens(n) && !declared.has(n) && !subscribed.has(n));
  if (fresh.length === 0) return;
  await e.request('register_queues', { queues: fresh.map((name) => ({ name })) });
  for (const n of fresh) subscribed.add(n);
}

/** Whether this process dequeues the queue (DBOSConfig.listenQueues). */
function listens(name: string): boolean {
  const listen = configSource()?.listenQueues;
  return listen === undefined || listen.includes(name);
}

function forThisWorker(r: QueueRegistration): QueueRegistration {
  return listens(r.name) ? r : { ...r, configure_only: true };
}

function hasPartitionLimits(p: QueueParameters): boolean {
  return p.partitionConcurrency !== undefined || p.partitionWorkerConcurrency !== undefined || p.partitionRateLimit !== undefined;
}

const REMOVED_QUEUE_PARAMS: Record<string, string> = {
  priorityEnabled: 'every queue dispatches in priority order, so the option can be deleted',
  partitionQueue:
    'set partitionConcurrency, partitionWorkerConcurrency, or partitionRateLimit instead, any of which partitions the queue',
};

/** DBOS's checks of a set of queue parameters, with its messages. */
function validateQueueParams(params: LegacyQueueParameters, legacy: boolean): void {
  if (!legacy) {
    for (const [option, replacement] of Object.entries(REMOVED_QUEUE_PARAMS)) {
      if (Object.hasOwn(params, option)) throw new Error(`${option} was removed: ${replacement}.`);
    }
  }
  const { concurrency, globalConcurrency, workerConcurrency, rateLimit, partitionConcurrency, partitionWorkerConcurrency, partitionRateLimit, minPollingIntervalMs } =
    params;
  if (concurrency !== undefined && globalConcurrency !== undefined) {
    throw new Error('concurrency is deprecated in favor of globalConcurrency; set only one of them');
  }
  if (legacy && params.partitionQueue && hasPartitionLimits(params)) {
    throw new Error('partitionQueue is deprecated in favor of the partition limits; set only one of them');
  }
  if (legacy && params.partitionQueue && globalConcurrency !== undefined) {
    throw new Error(
      'partitionQueue applies every limit per partition, so it cannot be combined with globalConcurrency; use partitionConcurrency instead',
    );
  }
  if (partitionConcurrency !== undefined && partitionConcurrency < 1) throw new Error('partitionConcurrency must be at least 1');
  if (partitionWorkerConcurrency !== undefined && partitionWorkerConcurrency < 1) {
    throw new Error('partitionWorkerConcurrency must be at least 1');
  }
  if (partitionRateLimit !== undefined && (partitionRateLimit.limitPerPeriod === undefined || partitionRateLimit.periodSec === undefined)) {
    throw new Error('partitionRateLimit must specify both limitPerPeriod and periodSec');
  }
  if (partitionWorkerConcurrency !== undefined && partitionConcurrency !== undefined && partitionWorkerConcurrency > partitionConcurrency) {
    throw new Error('partitionConcurrency must be greater than or equal to partitionWorkerConcurrency');
  }
  if (partitionWorkerConcurrency !== undefined && workerConcurrency !== undefined && partitionWorkerConcurrency > workerConcurrency) {
    throw new Error('workerConcurrency must be greater than or equal to partitionWorkerConcurrency');
  }
  const queueConcurrency = globalConcurrency ?? concurrency;
  if (workerConcurrency !== undefined && queueConcurrency !== undefined && workerConcurrency > queueConcurrency) {
    throw new Error('concurrency must be greater than or equal to workerConcurrency');
  }
  if (partitionConcurrency !== undefined && queueConcurrency !== undefined && partitionConcurrency > queueConcurrency) {
    throw new Error('globalConcurrency must be greater than or equal to partitionConcurrency');
  }
  if (partitionWorkerConcurrency !== undefined && queueConcurrency !== undefined && partitionWorkerConcurrency > queueConcurrency) {
    throw new Error('concurrency must be greater than or equal to partitionWorkerConcurrency');
  }
  if (minPollingIntervalMs !== undefined && minPollingIntervalMs <= 0) throw new Error('minPollingIntervalMs must be positive');
  if (rateLimit !== undefined && (rateLimit.limitPerPeriod === undefined || rateLimit.periodSec === undefined)) {
    throw new Error('rateLimit must specify both limitPerPeriod and periodSec');
  }
}

function validateQueueName(name: string): void {
  if (name.startsWith(RESERVED_QUEUE_NAME_PREFIX)) {
    throw new Error(
      `Queue name ${name} is reserved: names starting with '${RESERVED_QUEUE_NAME_PREFIX}' belong to DBOS's internal queues.`,
    );
  }
}

/** The registration that stores exactly these limits (every option sent, so the row is overwritten). */
function registrationFor(name: string, p: LegacyQueueParameters): QueueRegistration {
  const r: QueueRegistration = { name };
  const concurrency = p.globalConcurrency ?? p.concurrency;
  if (concurrency !== undefined) r.concurrency = concurrency;
  if (p.workerConcurrency !== undefined) r.worker_concurrency = p.workerConcurrency;
  if (p.rateLimit) {
    r.rate_limit_max = p.rateLimit.limitPerPeriod;
    r.rate_limit_period_sec = p.rateLimit.periodSec;
  }
  if (p.partitionConcurrency !== undefined) r.partition_concurrency = p.partitionConcurrency;
  if (p.partitionWorkerConcurrency !== undefined) r.partition_worker_concurrency = p.partitionWorkerConcurrency;
  if (p.partitionRateLimit) {
    r.partition_rate_limit_max = p.partitionRateLimit.limitPerPeriod;
    r.partition_rate_limit_period_sec = p.partitionRateLimit.periodSec;
  }
  if (p.priorityEnabled) r.priority_enabled = true;
  if (p.partitionQueue || hasPartitionLimits(p)) r.partition_queue = true;
  // Always set (DBOS stores 1 s when none is given): it makes this an options
  // registration, which overwrites the row, even when no limit is set.
  r.polling_interval_sec = (p.minPollingIntervalMs ?? 1000) / 1000;
  return r;
}

function rateLimitOf(max: number | undefined, period: number | undefined): QueueRateLimit | undefined {
  return max !== undefined && period !== undefined ? { limitPerPeriod: max, periodSec: period } : undefined;
}

/**
 * Where a queue's operations go: the requester, and how a registration is
 * written (a worker's serves the queue, within listenQueues; a client's
 * writes the row for the application it names).
 */
export interface QueueHost {
  req(): Requester;
  /** Writes r; owner, when known, is the stored row's application (a client writes for it). */
  write(r: QueueRegistration, owner?: string): Promise<void>;
  readonly clientBound: boolean;
}

/** DBOS.*'s queues: the worker's engine, found when used (a 4.x queue is declared before launch). */
const workerHost: QueueHost = {
  req: () => requireEngine('queue operations'),
  async write(r) {
    await requireEngine('queue registration').request('register_queues', { queues: [forThisWorker(r)] });
  },
  clientBound: false,
};

/** A client's queues: rows written for `applicationName` (default the client's application). */
export function clientQueueHost(req: Requester, applicationName?: string): QueueHost {
  return {
    req: () => req,
    async write(r, owner) {
      await req.request('register_queues', { queues: [r], application_name: owner || applicationName || undefined });
    },
    clientBound: true,
  };
}

async function fetchQueue(req: Requester, name: string): Promise<QueueInfo | null> {
  try {
    const info = (await req.request('get_queue', { name })) as unknown as QueueInfo;
    return info.registered ? info : null;
  } catch (err) {
    // invalid_argument: neither registered nor holding active workflows.
    if (!(await listQueueInfos(req, undefined)).some((q) => q.name === name)) return null;
    throw err;
  }
}

/** The registered queues (those these applications own and the unclaimed ones; every one when undefined). */
async function listQueueInfos(req: Requester, applications: string[] | undefined): Promise<QueueInfo[]> {
  const reply = await req.request('list_queues', applications ? { application_name: applications } : {});
  return (reply.queues as QueueInfo[]).filter((q) => q.registered);
}

/**
 * A named workflow queue. Its configuration is the shared row the agent
 * keeps; the fields are the last values read, the getters read the row again
 * and the setters write it.
 */
export class WorkflowQueue {
  readonly name: string;
  concurrency?: number;
  rateLimit?: QueueRateLimit;
  workerConcurrency?: number;
  partitionConcurrency?: number;
  partitionWorkerConcurrency?: number;
  partitionRateLimit?: QueueRateLimit;
  minPollingIntervalMs?: number;
  /** DBOS TypeScript 4.x's flags (stored for the SDKs that read them). */
  priorityEnabled = false;
  partitionQueue = false;
  /** The application that registered the row; undefined when unclaimed. */
  applicationName?: string;
  /** Every queue of this binding is a row of the queues table. */
  readonly databaseBacked: boolean = true;
  /** Read through a DBOSClient: its setters write through that client. */
  readonly clientBound: boolean = false;
  /** Where its reads and writes go (not enumerable: a queue prints as its options). */
  declare private readonly host: QueueHost;

  /**
   * DBOS TypeScript 4.x's declaration: the queue is stored with these
   * options and served by this process (in the launch's `hello`, or at once
   * when DBOS is already launched).
   */
  constructor(name: string, queueParameters?: LegacyQueueParameters | number, rateLimit?: QueueRateLimit) {
    this.name = name;
    const params: LegacyQueueParameters =
      typeof queueParameters === 'object' && queueParameters !== null ? queueParameters : { concurrency: queueParameters, rateLimit };
    validateQueueName(name);
    validateQueueParams(params, true);
    if (declared.has(name)) throw Error(`Workflow Queue '${name}' defined multiple times`);
    const reg = registrationFor(name, params);
    Object.defineProperty(this, 'host', { value: workerHost });
    this.applyInfo({ ...reg, registered: true });
    declared.set(name, reg);
    if (maybeEngine()) {
      workerHost.write(reg).catch((err: Error) => console.error(`dbos-agent: could not register queue ${name}: ${err.message}`));
    }
  }

  /** A queue as stored, without declaring it; its setters write through host. */
  static fromInfo(info: QueueInfo, host: QueueHost = workerHost): WorkflowQueue {
    const q = Object.create(WorkflowQueue.prototype) as WorkflowQueue;
    Object.assign(q, { name: info.name, databaseBacked: true, clientBound: host.clientBound, priorityEnabled: false, partitionQueue: false });
    Object.defineProperty(q, 'host', { value: host });
    q.applyInfo(info);
    return q;
  }

  /** DBOS's check of a user's queue registration. */
  static validateQueueRegistration(name: string, params: QueueParameters): void {
    validateQueueName(name);
    validateQueueParams(params, false);
  }

  static validateQueueParams(params: QueueParameters): void {
    validateQueueParams(params, false);
  }

  private applyInfo(info: QueueInfo): void {
    this.concurrency = info.concurrency;
    this.workerConcurrency = info.worker_concurrency;
    this.rateLimit = rateLimitOf(info.rate_limit_max, info.rate_limit_period_sec);
    this.partitionConcurrency = info.partition_concurrency;
    this.partitionWorkerConcurrency = info.partition_worker_concurrency;
    this.partitionRateLimit = rateLimitOf(info.partition_rate_limit_max, info.partition_rate_limit_period_sec);
    this.minPollingIntervalMs = info.polling_interval_sec !== undefined ? info.polling_interval_sec * 1000 : undefined;
    this.priorityEnabled = info.priority_enabled ?? false;
    this.partitionQueue = info.partition_queue ?? false;
    this.applicationName = info.application_name;
  }

  /** Reads the row again into the cached fields. */
  private async refresh(): Promise<void> {
    const info = await fetchQueue(this.host.req(), this.name);
    if (!info) throw new Error(`Queue '${this.name}' was not found in the database.`);
    this.applyInfo(info);
  }

  private params(): LegacyQueueParameters {
    return {
      concurrency: this.concurrency,
      workerConcurrency: this.workerConcurrency,
      rateLimit: this.rateLimit,
      partitionConcurrency: this.partitionConcurrency,
      partitionWorkerConcurrency: this.partitionWorkerConcurrency,
      partitionRateLimit: this.partitionRateLimit,
      minPollingIntervalMs: this.minPollingIntervalMs,
      priorityEnabled: this.priorityEnabled,
      // 4.x's partitioned mode (the flag without partition limits) is kept; otherwise the flag follows the limits.
      partitionQueue: this.partitionQueue && !hasPartitionLimits(this),
    };
  }

  /** Writes the row as stored with `change` applied, and serves the queue here from then on. */
  private async store(change: Partial<LegacyQueueParameters>): Promise<void> {
    const next = { ...this.params(), ...change };
    const reg = registrationFor(this.name, next);
    await this.host.write(reg, this.applicationName);
    if (!this.host.clientBound) {
      // A queue whose options this code declared keeps announcing them; one it
      // only serves is announced by name, the row now holding the change.
      const prior = declared.get(this.name);
      declared.set(this.name, prior && prior.polling_interval_sec !== undefined ? reg : { name: this.name });
    }
    this.applyInfo({ ...reg, registered: true, application_name: this.applicationName });
  }

  /** @deprecated Use `setGlobalConcurrency`. */
  setConcurrency(value: number | undefined): Promise<void> {
    return this.setGlobalConcurrency(value);
  }

  async setGlobalConcurrency(value: number | undefined): Promise<void> {
    await this.refresh();
    if (value !== undefined) {
      if (this.workerConcurrency !== undefined && this.workerConcurrency > value) {
        throw new Error('workerConcurrency must be less than or equal to concurrency');
      }
      if (this.partitionConcurrency !== undefined && this.partitionConcurrency > value) {
        throw new Error('partitionConcurrency must be less than or equal to globalConcurrency');
      }
      if (this.partitionWorkerConcurrency !== undefined && this.partitionWorkerConcurrency > value) {
        throw new Error('partitionWorkerConcurrency must be less than or equal to concurrency');
      }
    }
    await this.store({ concurrency: value });
  }

  async setWorkerConcurrency(value: number | undefined): Promise<void> {
    await this.refresh();
    if (value !== undefined) {
      if (this.concurrency !== undefined && value > this.concurrency) {
        throw new Error('workerConcurrency must be less than or equal to concurrency');
      }
      if (this.partitionWorkerConcurrency !== undefined && this.partitionWorkerConcurrency > value) {
        throw new Error('partitionWorkerConcurrency must be less than or equal to workerConcurrency');
      }
    }
    await this.store({ workerConcurrency: value });
  }

  async setRateLimit(value: QueueRateLimit | undefined): Promise<void> {
    if (value !== undefined && (value.limitPerPeriod === undefined || value.periodSec === undefined)) {
      throw new Error('rateLimit must specify both limitPerPeriod and periodSec');
    }
    await this.refresh();
    await this.store({ rateLimit: value });
  }

  async setPartitionConcurrency(value: number | undefined): Promise<void> {
    if (value !== undefined && value < 1) throw new Error('partitionConcurrency must be at least 1');
    await this.refresh();
    if (value !== undefined) {
      if (this.concurrency !== undefined && value > this.concurrency) {
        throw new Error('partitionConcurrency must be less than or equal to globalConcurrency');
      }
      if (this.partitionWorkerConcurrency !== undefined && this.partitionWorkerConcurrency > value) {
        throw new Error('partitionConcurrency must be greater than or equal to partitionWorkerConcurrency');
      }
    }
    await this.store({ partitionConcurrency: value });
  }

  async setPartitionWorkerConcurrency(value: number | undefined): Promise<void> {
    if (value !== undefined && value < 1) throw new Error('partitionWorkerConcurrency must be at least 1');
    await this.refresh();
    if (value !== undefined) {
      if (this.partitionConcurrency !== undefined && value > this.partitionConcurrency) {
        throw new Error('partitionWorkerConcurrency must be less than or equal to partitionConcurrency');
      }
      if (this.workerConcurrency !== undefined && value > this.workerConcurrency) {
        throw new Error('partitionWorkerConcurrency must be less than or equal to workerConcurrency');
      }
      if (this.concurrency !== undefined && value > this.concurrency) {
        throw new Error('partitionWorkerConcurrency must be less than or equal to concurrency');
      }
    }
    await this.store({ partitionWorkerConcurrency: value });
  }

  async setPartitionRateLimit(value: QueueRateLimit | undefined): Promise<void> {
    if (value !== undefined && (value.limitPerPeriod === undefined || value.periodSec === undefined)) {
      throw new Error('partitionRateLimit must specify both limitPerPeriod and periodSec');
    }
    await this.refresh();
    await this.store({ partitionRateLimit: value });
  }

  async setMinPollingIntervalMs(value: number): Promise<void> {
    if (value <= 0) throw new Error('minPollingIntervalMs must be positive');
    await this.refresh();
    await this.store({ minPollingIntervalMs: value });
  }

  /** @deprecated Use `getGlobalConcurrency`. */
  getConcurrency(): Promise<number | undefined> {
    return this.getGlobalConcurrency();
  }

  getGlobalConcurrency(): Promise<number | undefined> {
    return this.read('concurrency');
  }

  getWorkerConcurrency(): Promise<number | undefined> {
    return this.read('workerConcurrency');
  }

  getRateLimit(): Promise<QueueRateLimit | undefined> {
    return this.read('rateLimit');
  }

  getPartitionConcurrency(): Promise<number | undefined> {
    return this.read('partitionConcurrency');
  }

  getPartitionWorkerConcurrency(): Promise<number | undefined> {
    return this.read('partitionWorkerConcurrency');
  }

  getPartitionRateLimit(): Promise<QueueRateLimit | undefined> {
    return this.read('partitionRateLimit');
  }

  getMinPollingIntervalMs(): Promise<number | undefined> {
    return this.read('minPollingIntervalMs');
  }

  /** A field as the row holds it now. */
  private async read<K extends keyof LimitFields>(field: K): Promise<WorkflowQueue[K]> {
    await this.refresh();
    return this[field];
  }
}

type LimitFields = Pick<
  WorkflowQueue,
  'concurrency' | 'workerConcurrency' | 'rateLimit' | 'partitionConcurrency' | 'partitionWorkerConcurrency' | 'partitionRateLimit' | 'minPollingIntervalMs'
>;

// ---- the DBOS and DBOSClient calls (from dbos.ts and client.ts) -------------

/**
 * Writes a queue's registration (its options, or when the stored row is to
 * be kept, its name) and reads the row back: DBOS's registerQueue, for
 * either host.
 */
async function registerWith(host: QueueHost, name: string, params: QueueParameters, update: boolean): Promise<WorkflowQueue> {
  WorkflowQueue.validateQueueRegistration(name, params);
  const req = host.req();
  // Without update, a bare name: the agent creates the row with no limits if
  // it is missing, so a missing row is written with the options instead.
  const reg = update || (await fetchQueue(req, name)) === null ? registrationFor(name, params) : { name };
  await host.write(reg);
  const stored = await fetchQueue(req, name);
  if (!stored) throw new Error(`Queue '${name}' missing from database after upsert`);
  return WorkflowQueue.fromInfo(stored, host);
}

/** DBOS.registerQueue: by default the options win only when this process runs the latest version. */
export async function registerQueue(name: string, options: RegisterQueueOptions = {}): Promise<WorkflowQueue> {
  const e = requireEngine('registerQueue');
  const { onConflict = 'update_if_latest_version', ...params } = options;
  let update: boolean;
  if (onConflict === 'always_update') update = true;
  else if (onConflict === 'never_update') update = false;
  else {
    const versions = (await e.request('list_versions', {})).versions as Array<{ version_name: string }>;
    update = versions.length === 0 || versions[0].version_name === e.appVersion;
  }
  const q = await registerWith(workerHost, name, params, update);
  if (!declared.has(name) || declared.get(name)!.polling_interval_sec === undefined) declared.set(name, { name });
  return q;
}

/**
 * DBOSClient.registerQueue: a client has no version, so its default is
 * always_update and update_if_latest_version is refused, as in DBOS; the
 * queue belongs to applicationName, default the client's.
 */
export async function clientRegisterQueue(
  req: Requester,
  name: string,
  options: RegisterQueueOptions & { applicationName?: string } = {},
): Promise<WorkflowQueue> {
  const { onConflict = 'always_update', applicationName, ...params } = options;
  if (onConflict === 'update_if_latest_version') {
    throw new Error(
      "DBOSClient.registerQueue does not support onConflict='update_if_latest_version' " +
        'because clients are not associated with an application version. ' +
        "Use 'always_update' or 'never_update'.",
    );
  }
  return registerWith(clientQueueHost(req, applicationName ?? req.appName), name, params, onConflict === 'always_update');
}

export async function retrieveQueue(name: string): Promise<WorkflowQueue | null> {
  requireEngine('retrieveQueue');
  return retrieveWith(workerHost, name);
}

export async function retrieveWith(host: QueueHost, name: string): Promise<WorkflowQueue | null> {
  const info = await fetchQueue(host.req(), name);
  return info ? WorkflowQueue.fromInfo(info, host) : null;
}

export async function deleteQueue(name: string): Promise<void> {
  await deleteWith(requireEngine('deleteQueue'), name);
  declared.delete(name);
  subscribed.delete(name);
}

export async function deleteWith(req: Requester, name: string): Promise<void> {
  await req.request('delete_queue', { name });
}

export async function listQueues(applicationName?: string | string[]): Promise<WorkflowQueue[]> {
  requireEngine('listQueues');
  return listWith(workerHost, applicationName);
}

/** The stored queues of these applications (default the caller's), with the unclaimed ones. */
export async function listWith(host: QueueHost, applicationName?: string | string[]): Promise<WorkflowQueue[]> {
  const req = host.req();
  const apps = applicationName === undefined ? (req.appName ? [req.appName] : undefined) : [applicationName].flat();
  const names = (await listQueueInfos(req, apps)).map((q) => q.name);
  // list_queues leaves out the partition limits and the polling interval: read each row whole.
  const infos = await Promise.all(names.map((n) => fetchQueue(req, n)));
  return infos.filter((i): i is QueueInfo => i !== null).map((i) => WorkflowQueue.fromInfo(i, host));
}

export type { EnqueueWorkflowOptions } from './client';

/**
 * Enqueues a workflow by name (it may be another process's, or another
 * language's); from workflow code it is the caller's child, as a start is.
 */
export async function enqueueWorkflowWithOptions<T>(
  options: EnqueueWorkflowOptions,
  args: unknown[],
  namedArgs?: Record<string, unknown>,
): Promise<WorkflowHandle<T>> {
  const e = requireEngine('enqueueWorkflowWithOptions');
  const ctx = currentContext();
  if (ctx?.run && ctx.stepFunctionId !== undefined) {
    throw new DBOSInvalidWorkflowTransitionError('Invalid call to `enqueueWorkflowWithOptions` from within a `step` or `transaction`');
  }
  if (options.attributes !== undefined) {
    const a = options.attributes;
    if (a === null || typeof a !== 'object' || Array.isArray(a)) throw new DBOSError('workflowAttributes must be a plain object');
  }
  if (options.priority !== undefined && (options.priority < DBOS_QUEUE_MIN_PRIORITY || options.priority > DBOS_QUEUE_MAX_PRIORITY)) {
    throw new DBOSInvalidQueuePriorityError(options.priority, DBOS_QUEUE_MIN_PRIORITY, DBOS_QUEUE_MAX_PRIORITY);
  }
  if (options.workflowID !== undefined && options.workflowID.trim() === '') {
    throw new DBOSError(`Invalid workflow ID '${options.workflowID}': workflow IDs must be non-empty and cannot be only whitespace.`);
  }
  // The target need not be registered here: a registration-shaped stand-in names it.
  const target = {
    name: options.workflowName,
    className: options.workflowClassName ?? '',
    workflowConfig: { serialization: options.serializationType },
  } as unknown as FunctionRegistration;
  const instance = options.workflowConfigName ? { name: options.workflowConfigName } : undefined;
  const started = await e.start(target, instance, args, {
    workflowID: options.workflowID,
    queueName: options.queueName,
    timeoutMS: options.workflowTimeoutMS,
    authenticatedUser: options.authenticatedUser,
    authenticatedRoles: options.authenticatedRoles,
    workflowIDReusePolicy: options.workflowIDReusePolicy ?? 'return-existing',
    workflowAttributes: options.attributes,
    namedArgs,
    enqueueOptions: {
      deduplicationID: options.deduplicationID,
      priority: options.priority,
      queuePartitionKey: options.queuePartitionKey,
      delaySeconds: options.delaySeconds !== undefined && options.delaySeconds > 0 ? options.delaySeconds : undefined,
      applicationName: options.applicationName ?? (e.appName || undefined),
      appVersion: options.appVersion,
    },
  });
  return new AgentWorkflowHandle<T>(() => requireEngine(), started.workflowID);
}
