/**
 * Workflow management and application versions, as DBOS TypeScript 5.x
 * offers them (DBOS.listWorkflows ... DBOS.setLatestApplicationVersion, and
 * the same methods of DBOSClient): each operation is written once here, over
 * a `Requester` that the worker's engine and the client both provide, so the
 * two differ only in the connection they use.
 *
 * DBOS's filters and defaults are translated to the protocol's requests
 * (PROTOCOL.md section 7); what the agent answers is decoded with the
 * caller's serializer. DBOS.* wraps these in the durable steps DBOS TypeScript
 * names ('DBOS.listWorkflows', 'DBOS.cancelWorkflow', ...); the client calls
 * them directly.
 */
import { randomUUID } from 'node:crypto';
import {
  DBOSError,
  DBOSInitializationError,
  DBOSInvalidQueuePriorityError,
  DBOSNonExistentWorkflowError,
} from './error';
import { deserializeError, deserializeValue } from './serialization';
import { Requester, fetchStatus, toStatus } from './runtime';
// Used at call time only, so the cycle with dbos.ts (which forwards to this module) is harmless.
import { DBOS_QUEUE_MAX_PRIORITY, DBOS_QUEUE_MIN_PRIORITY } from './dbos';
import type { ApplicationRowCounts, WorkflowStatus, WorkflowStatusString } from './types';
import type { DataSourceTransactionHandler } from './datasource';

/** DBOS TypeScript's filter of DBOS.listWorkflows; dates are ISO strings (anything `new Date` reads). */
export interface GetWorkflowsInput {
  workflowIDs?: string[];
  workflowName?: string | string[];
  status?: WorkflowStatusString | WorkflowStatusString[];
  startTime?: string;
  endTime?: string;
  completedAfter?: string;
  completedBefore?: string;
  dequeuedAfter?: string;
  dequeuedBefore?: string;
  authenticatedUser?: string | string[];
  applicationVersion?: string | string[];
  executorId?: string | string[];
  workflow_id_prefix?: string | string[];
  queueName?: string | string[];
  queuesOnly?: boolean;
  forkedFrom?: string | string[];
  wasForkedFrom?: boolean;
  isFork?: boolean;
  parentWorkflowID?: string | string[];
  hasParent?: boolean;
  attributes?: Record<string, unknown>;
  scheduleName?: string | string[];
  applicationName?: string | string[];
  limit?: number;
  offset?: number;
  sortDesc?: boolean;
  loadInput?: boolean;
  loadOutput?: boolean;
}

/** A recorded step of a workflow (DBOS.listWorkflowSteps). */
export interface StepInfo {
  readonly functionID: number;
  readonly name: string;
  readonly output: unknown;
  readonly error: Error | null;
  readonly childWorkflowID: string | null;
  readonly startedAtEpochMs?: number;
  readonly completedAtEpochMs?: number;
}

export interface ListWorkflowStepsOptions {
  limit?: number;
  offset?: number;
}

export interface VersionInfo {
  versionId: string;
  versionName: string;
  versionTimestamp: number;
  createdAt: number;
  applicationName?: string;
}

/** Options for `DBOS.cancelWorkflow` and `DBOS.cancelWorkflows`. */
export interface CancelWorkflowsOptions {
  /** Also cancel every descendant (child) workflow, recursively (default false). */
  cancelChildren?: boolean;
}

/** Options for `DBOS.setWorkflowDelay`. */
export interface SetWorkflowDelayOptions {
  /** Seconds from now. */
  delaySeconds?: number;
  /** An absolute release time, epoch milliseconds. */
  delayUntilEpochMS?: number;
}

export interface ForkWorkflowOptions {
  newWorkflowID?: string;
  applicationVersion?: string;
  timeoutMS?: number;
  queueName?: string;
  queuePartitionKey?: string;
  replacementChildren?: Record<string, string>;
}

export interface RewindWorkflowOptions {
  startStep?: number;
  applicationVersion?: string;
  queueName?: string;
  queuePartitionKey?: string;
}

const QUEUED_STATUSES: readonly string[] = ['ENQUEUED', 'PENDING', 'DELAYED'];

function list<T>(v: T | T[] | undefined): T[] | undefined {
  if (v === undefined || v === null || (v as unknown) === '') return undefined;
  return Array.isArray(v) ? v : [v];
}

function epochMS(iso: string | undefined): number | undefined {
  if (!iso) return undefined;
  const ms = new Date(iso).getTime();
  if (Number.isNaN(ms)) throw new DBOSError(`Invalid date in workflow filter: ${iso}`);
  return ms;
}

/**
 * The `list_workflows` request for DBOS's filter, with DBOS's defaults:
 * payloads loaded, oldest first, and (unless ids are given) scoped to the
 * caller's application and the unclaimed rows. Undefined when the filter
 * can match nothing.
 */
export function listWorkflowsBody(input: GetWorkflowsInput, appName: string | undefined): Record<string, unknown> | undefined {
  if (input.workflowIDs && input.workflowIDs.length === 0) return undefined;
  let status = list(input.status) as string[] | undefined;
  if (input.queuesOnly && status) {
    // DBOS lists a queue's active workflows only, whatever else the filter says.
    status = status.filter((s) => QUEUED_STATUSES.includes(s));
    if (status.length === 0) return undefined;
  }
  const prefixes = list(input.workflow_id_prefix);
  const idKeyed = (input.workflowIDs?.length ?? 0) > 0;
  const applications = list(input.applicationName) ?? (!idKeyed && appName ? [appName] : undefined);
  const attributes = input.attributes && Object.keys(input.attributes).length > 0 ? JSON.stringify(input.attributes) : undefined;
  return {
    workflow_ids: input.workflowIDs,
    workflow_id_prefixes: prefixes,
    status,
    name: list(input.workflowName),
    queue_name: list(input.queueName),
    queues_only: input.queuesOnly || undefined,
    executor_id: list(input.executorId),
    app_version: list(input.applicationVersion),
    parent_workflow_id: list(input.parentWorkflowID),
    user: list(input.authenticatedUser),
    start_time: epochMS(input.startTime),
    end_time: epochMS(input.endTime),
    completed_after: epochMS(input.completedAfter),
    completed_before: epochMS(input.completedBefore),
    dequeued_after: epochMS(input.dequeuedAfter),
    dequeued_before: epochMS(input.dequeuedBefore),
    forked_from: list(input.forkedFrom),
    schedule_name: list(input.scheduleName),
    application_name: applications,
    attributes,
    was_forked_from: input.wasForkedFrom,
    is_fork: input.isFork,
    has_parent: input.hasParent,
    limit: input.limit || undefined,
    offset: input.offset || undefined,
    sort_desc: input.sortDesc ?? false,
    load_input: input.loadInput ?? true,
    load_output: input.loadOutput ?? true,
  };
}

export async function listWorkflows(req: Requester, input: GetWorkflowsInput): Promise<WorkflowStatus[]> {
  const body = listWorkflowsBody(input, req.appName);
  if (!body) return [];
  const reply = await req.request('list_workflows', body);
  const infos = (reply.workflows as Record<string, unknown>[] | undefined) ?? [];
  return Promise.all(infos.map((info) => toStatus(info, req.serializer)));
}

/** DBOS.listQueuedWorkflows: the enqueued, delayed and running workflows of queues, without outputs. */
export function listQueuedWorkflows(req: Requester, input: GetWorkflowsInput): Promise<WorkflowStatus[]> {
  return listWorkflows(req, { ...input, queuesOnly: true, loadOutput: false });
}

/** DBOSClient.getWorkflow: the status, or undefined when no workflow has the id. */
export async function getWorkflow(req: Requester, workflowID: string): Promise<WorkflowStatus | undefined> {
  return (await fetchStatus(req, workflowID)) ?? undefined;
}

/** The recorded steps, by function id; undefined when the workflow does not exist (as DBOS). */
export async function listWorkflowSteps(
  req: Requester,
  workflowID: string,
  options?: ListWorkflowStepsOptions,
): Promise<StepInfo[] | undefined> {
  try {
    await req.request('get_workflow', { workflow_id: workflowID });
  } catch (err) {
    if (err instanceof DBOSNonExistentWorkflowError) return undefined;
    throw err;
  }
  const reply = await req.request('list_steps', { workflow_id: workflowID });
  const steps = ((reply.steps as Record<string, unknown>[] | undefined) ?? []).slice();
  steps.sort((a, b) => (a.function_id as number) - (b.function_id as number));
  const offset = options?.offset ?? 0;
  const page = options?.limit !== undefined ? steps.slice(offset, offset + options.limit) : steps.slice(offset);
  return Promise.all(page.map((s) => toStepInfo(s, req)));
}

async function toStepInfo(step: Record<string, unknown>, req: Requester): Promise<StepInfo> {
  const ser = (step.serialization as string | undefined) ?? null;
  const output = step.output as string | null | undefined;
  const error = step.error as string | null | undefined;
  return {
    functionID: step.function_id as number,
    name: (step.name as string | undefined) ?? '',
    // As DBOS: a payload that does not decode is given as stored.
    output: output ? await deserializeValue(output, ser, req.serializer).catch(() => output) : null,
    error: error ? await deserializeError(error, ser, req.serializer).catch(() => new Error(error)) : null,
    childWorkflowID: (step.child_workflow_id as string | undefined) ?? null,
    startedAtEpochMs: (step.started_at_epoch_ms as number | undefined) || undefined,
    completedAtEpochMs: (step.completed_at_epoch_ms as number | undefined) || undefined,
  };
}

/** Cancels each workflow; as in DBOS, an id that names no workflow is passed over. */
export async function cancelWorkflows(req: Requester, workflowIDs: string[], options?: CancelWorkflowsOptions): Promise<void> {
  for (const id of workflowIDs) {
    try {
      await req.request('cancel_workflow', { workflow_id: id, cancel_children: options?.cancelChildren || undefined });
    } catch (err) {
      if (!(err instanceof DBOSNonExistentWorkflowError)) throw err;
    }
  }
}

/** Puts the workflows back on a queue, all or none (DBOSNonExistentWorkflowError names the missing). */
export async function resumeWorkflows(req: Requester, workflowIDs: string[], queueName?: string): Promise<void> {
  if (workflowIDs.length === 0) return;
  await req.request('resume_workflow', { workflow_ids: workflowIDs, queue_name: queueName });
}

export async function deleteWorkflows(req: Requester, workflowIDs: string[], deleteChildren = false): Promise<void> {
  if (workflowIDs.length === 0) return;
  await req.request('delete_workflows', { workflow_ids: workflowIDs, delete_children: deleteChildren || undefined });
}

/** Starts a new workflow from another's steps below startStep; gives the fork's id. */
export async function forkWorkflow(
  req: Requester,
  workflowID: string,
  startStep: number,
  options: ForkWorkflowOptions = {},
): Promise<string> {
  const newWorkflowID = options.newWorkflowID ?? randomUUID();
  const reply = await req.request('fork_workflow', {
    workflow_id: workflowID,
    start_step: startStep,
    new_workflow_id: newWorkflowID,
    app_version: options.applicationVersion,
    queue_name: options.queueName,
    partition_key: options.queuePartitionKey,
    timeout_ms: options.timeoutMS,
    replacement_children: options.replacementChildren,
  });
  return (reply.workflow_id as string | undefined) ?? newWorkflowID;
}

/** Re-runs an ended workflow under its own id, its history from startStep (default 0) dropped. */
export async function rewindWorkflow(
  req: Requester,
  workflowID: string,
  options: RewindWorkflowOptions = {},
  dataSources: DataSourceTransactionHandler[] = [],
): Promise<void> {
  const startStep = options.startStep ?? 0;
  if (startStep < 0) throw new DBOSError(`startStep must be >= 0, got ${startStep}`);
  const keeping = dataSources.filter((ds) => ds.deleteCheckpoints !== undefined);
  if (keeping.length > 0) {
    // A running workflow's checkpoints are its run's: only an ended one's are deleted. The agent
    // checks this again as it rewinds; the data sources are done first, since their deletes can
    // be repeated if the rewind then fails, and the rewind cannot be undone.
    const status = await fetchStatus(req, workflowID, false);
    if (status && ['PENDING', 'ENQUEUED', 'DELAYED'].includes(status.status)) {
      throw new DBOSError(`Cannot rewind ${workflowID} (${status.status}): only a workflow in a terminal state can be rewound, so cancel it first`);
    }
    for (const ds of keeping) await ds.deleteCheckpoints!(workflowID, startStep);
  }
  await req.request('rewind_workflow', {
    workflow_id: workflowID,
    start_step: startStep,
    app_version: options.applicationVersion,
    queue_name: options.queueName,
    partition_key: options.queuePartitionKey,
  });
}

/** DBOS's reading of setWorkflowDelay's argument: the release time, epoch ms. */
export function resolveDelayEpochMS(options: number | SetWorkflowDelayOptions): number {
  if (typeof options === 'number') {
    if (options <= 0) throw new DBOSError('delaySeconds must be greater than 0');
    return Date.now() + options * 1000;
  }
  if (options.delayUntilEpochMS !== undefined) {
    if (options.delayUntilEpochMS <= 0) throw new DBOSError('delayUntilEpochMS must be greater than 0');
    return options.delayUntilEpochMS;
  }
  if (options.delaySeconds !== undefined) {
    if (options.delaySeconds <= 0) throw new DBOSError('delaySeconds must be greater than 0');
    return Date.now() + options.delaySeconds * 1000;
  }
  throw new DBOSError('SetWorkflowDelayOptions must specify either delaySeconds or delayUntilEpochMS');
}

/** Moves a DELAYED workflow's release time; as in DBOS, any other workflow (or none) is left alone. */
export async function setWorkflowDelay(req: Requester, workflowID: string, delayUntilEpochMS: number): Promise<void> {
  const status = await fetchStatus(req, workflowID, false);
  if (status?.status !== 'DELAYED') return;
  await req.request('set_workflow_delay', { workflow_id: workflowID, delay_until_epoch_ms: Math.round(delayUntilEpochMS) });
}

export function checkPriority(priority: number): void {
  if (priority < DBOS_QUEUE_MIN_PRIORITY || priority > DBOS_QUEUE_MAX_PRIORITY) {
    throw new DBOSInvalidQueuePriorityError(priority, DBOS_QUEUE_MIN_PRIORITY, DBOS_QUEUE_MAX_PRIORITY);
  }
}

/**
 * DBOS.setWorkflowPriority: a workflow waiting on its queue (ENQUEUED or
 * DELAYED) takes the new priority; one that runs, ended or does not exist is
 * left alone, as DBOS leaves it.
 */
export async function setWorkflowPriority(req: Requester, workflowID: string, priority: number): Promise<void> {
  checkPriority(priority);
  await req.request('set_workflow_priority', { workflow_id: workflowID, priority });
}

function toVersionInfo(v: Record<string, unknown>): VersionInfo {
  return {
    versionId: v.version_id as string,
    versionName: v.version_name as string,
    versionTimestamp: v.version_timestamp as number,
    createdAt: v.created_at as number,
    applicationName: v.application_name as string | undefined,
  };
}

/** The application's versions (and the unclaimed ones), the latest first. */
export async function listApplicationVersions(req: Requester): Promise<VersionInfo[]> {
  const reply = await req.request('list_versions', {});
  return ((reply.versions as Record<string, unknown>[] | undefined) ?? []).map(toVersionInfo);
}

export async function getLatestApplicationVersion(req: Requester): Promise<VersionInfo> {
  const [latest] = await listApplicationVersions(req);
  if (!latest) throw new DBOSInitializationError('No application versions found');
  return latest;
}

export async function setLatestApplicationVersion(
  req: Requester,
  versionName: string,
  options?: { applicationName?: string },
): Promise<void> {
  await req.request('promote_version', { version_name: versionName, application_name: options?.applicationName });
}

/** DBOS's default count of terminal workflows re-owned per transaction. */
export const DEFAULT_RENAME_BATCH_SIZE = 10000;

/**
 * Gives newName the rows oldName owns, the unclaimed ones
 * (adoptUnclaimedRows), or both, with DBOS's checks and messages; null
 * batchSize moves everything in one transaction.
 */
export async function renameApplication(
  req: Requester,
  oldName: string | undefined,
  newName: string,
  options: { batchSize?: number | null; adoptUnclaimedRows?: boolean } = {},
): Promise<ApplicationRowCounts> {
  const adoptUnclaimedRows = options.adoptUnclaimedRows ?? false;
  const batchSize = options.batchSize === null ? undefined : (options.batchSize ?? DEFAULT_RENAME_BATCH_SIZE);
  if (oldName !== undefined && oldName === '') throw new DBOSError("The application's previous name cannot be empty.");
  if (oldName === undefined && !adoptUnclaimedRows) {
    throw new DBOSError('Nothing to re-own: name the application to rename, adopt unclaimed rows, or both.');
  }
  if (oldName === newName) throw new DBOSError(`Application '${newName}' already holds that name; nothing to rename.`);
  if (batchSize !== undefined && (!Number.isInteger(batchSize) || batchSize < 1)) {
    throw new DBOSError(`batchSize must be a positive integer, got ${batchSize}`);
  }
  const reply = await req.request('rename_application', {
    old_name: oldName,
    new_name: newName,
    batch_size: batchSize,
    adopt_unclaimed_rows: adoptUnclaimedRows || undefined,
  });
  return {
    queues: Number(reply.queues ?? 0),
    schedules: Number(reply.schedules ?? 0),
    versions: Number(reply.versions ?? 0),
    workflows: Number(reply.workflows ?? 0),
    steps: Number(reply.steps ?? 0),
  };
}
