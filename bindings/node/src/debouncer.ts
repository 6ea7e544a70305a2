/**
 * Debouncing: DBOS TypeScript's `Debouncer` and `DebouncerClient` over the
 * agent's `debounce_workflow` (PROTOCOL.md section 2.11). The agent does in
 * one request what DBOS does in a loop (bounce the pending workflow, else
 * enqueue a new one, retrying races), so each call is one round trip; from
 * workflow code it is durable, replayed from the caller's history.
 */
import type { ClientEnqueueOptions } from './client';
import { currentContext, takeAssignedWorkflowID } from './context';
import { requireEngine } from './dbos';
import { DBOSError, DBOSQueueDuplicatedError } from './error';
import { registrationOf } from './registry';
import { INTERNAL_QUEUE_NAME } from './runtime';
import { DBOSPortableJSON, serializeArgs } from './serialization';
import type { StartWorkflowParams, WorkflowHandle, WorkflowSerializationFormat } from './types';
import { AgentWorkflowHandle } from './workflow';

interface DebouncerConfig<Args extends unknown[], Return> {
  workflow: (...args: Args) => Promise<Return>;
  startWorkflowParams?: StartWorkflowParams;
  debounceTimeoutMs?: number;
  /** The application this debounce acts for. Defaults to the caller's own. */
  applicationName?: string;
}

interface DebouncerClientConfig {
  workflowName: string;
  workflowClassName?: string;
  startWorkflowParams?: StartWorkflowParams;
  debounceTimeoutMs?: number;
  serializationType?: WorkflowSerializationFormat;
  applicationName?: string;
}

/**
 * What DebouncerClient needs of a client (DBOSClient provides it): its
 * application, its enqueue of a debounced workflow (which pushes back the
 * key's pending one instead, in the same round trip) and its handles.
 */
export interface DebounceClient {
  readonly applicationName?: string;
  enqueueDebounced(options: ClientEnqueueOptions, debounceDeadlineEpochMS: number | undefined, args: unknown[]): Promise<string>;
  retrieveWorkflow<T = unknown>(workflowID: string): WorkflowHandle<T>;
}

/** DBOS's `DebounceResult`, recorded at the caller's step (portable_json). */
interface DebounceResult {
  bounced_workflow_id: string | null;
  holder_workflow_id: string | null;
  holder_is_debounced?: boolean;
  holder_workflow_name?: string | null;
  holder_application_name?: string | null;
}

/** The caller's step, as DBOS TypeScript records it (the agent's default is DBOS Python's name). */
const RECORDED_NAME = 'DBOS.debounceDelayedWorkflow';

/** The key's deduplication id as DBOS TypeScript forms it, so a bounce meets its pending workflow. */
function dedupIDOf(className: string, name: string, key: string): string {
  return `${className}.${name}-${key}`;
}

/** DBOS's refusals of start options a debounce owns, with its messages. */
function rejectConflictingOptions(params: StartWorkflowParams | undefined, rejectApplicationName: boolean): void {
  const enqueue = params?.enqueueOptions;
  if (rejectApplicationName && enqueue?.applicationName !== undefined) {
    throw new DBOSError(
      "Cannot debounce a workflow with an applicationName set: the debouncer's own applicationName option names the target application.",
    );
  }
  if (enqueue?.deduplicationID !== undefined) {
    throw new DBOSError('Cannot debounce a workflow with a deduplicationID set: the debounce key is used as the workflow deduplication ID.');
  }
  if (enqueue?.delaySeconds !== undefined) {
    throw new DBOSError('Cannot debounce a workflow with a delay set: the debounce period controls the delay.');
  }
  if (enqueue?.priority !== undefined) {
    throw new DBOSError('Cannot debounce a workflow with a priority set: priority is not supported for debounced workflows.');
  }
  if (enqueue?.queuePartitionKey !== undefined) {
    throw new DBOSError('Cannot debounce a workflow with a queue partition key set: partition keys are not supported for debounced workflows.');
  }
  if (params?.duplicationPolicy === 'return-existing') {
    throw new DBOSError("Cannot debounce a workflow with duplicationPolicy 'return-existing': a debounce owns the deduplication behavior.");
  }
  if (params?.workflowIDReusePolicy === 'reject') {
    throw new DBOSError("Cannot debounce a workflow with workflowIDReusePolicy 'reject': a debounce owns how its workflow is started.");
  }
}

function checkPeriod(debouncePeriodMs: number): void {
  if (!(debouncePeriodMs > 0)) throw Error(`debouncePeriodMs must be positive, not ${debouncePeriodMs}`);
}

/** The fields of a `DebounceWorkflow` request that a first call uses. */
function firstCallFields(
  params: StartWorkflowParams | undefined,
  timeoutMs: number | undefined,
  applicationName: string | undefined,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (params?.queueName && params.queueName !== INTERNAL_QUEUE_NAME) body.queue_name = params.queueName;
  if (timeoutMs) body.timeout_ms = Math.round(timeoutMs);
  if (typeof params?.timeoutMS === 'number') body.workflow_timeout_ms = Math.round(params.timeoutMS);
  if (params?.enqueueOptions?.appVersion) body.app_version = params.enqueueOptions.appVersion;
  if (params?.workflowAttributes) body.attributes = JSON.stringify(params.workflowAttributes);
  if (applicationName) body.application_name = applicationName;
  return body;
}

function deduplicated(workflowID: string, params: StartWorkflowParams | undefined, key: string, name: string, className: string): DBOSQueueDuplicatedError {
  return new DBOSQueueDuplicatedError(workflowID, params?.queueName ?? INTERNAL_QUEUE_NAME, dedupIDOf(className, name, key));
}

/**
 * Starts `workflow` once a key has been quiet for the debounce period, with
 * the arguments of the latest call.
 */
export class Debouncer<Args extends unknown[], Return> {
  private readonly cfg: DebouncerConfig<Args, Return> & { workflowName: string; workflowClassName: string };

  constructor(params: DebouncerConfig<Args, Return>) {
    const reg = registrationOf(params.workflow);
    this.cfg = { ...params, workflowName: reg?.name ?? params.workflow.name, workflowClassName: reg?.className ?? '' };
  }

  async debounce(debounceKey: string, debouncePeriodMs: number, ...args: Args): Promise<WorkflowHandle<Return>> {
    checkPeriod(debouncePeriodMs);
    const e = requireEngine('debounce');
    const params = this.cfg.startWorkflowParams;
    rejectConflictingOptions(params, true);
    const reg = registrationOf(this.cfg.workflow);
    if (!reg?.workflowConfig) throw new DBOSError(`Invalid workflow name provided to debouncer: ${this.cfg.workflowName}`);
    const pinned = params?.workflowID ?? takeAssignedWorkflowID();
    const ctx = currentContext();
    const inputs = await serializeArgs(args, e.serializer, reg.workflowConfig.serialization);
    const body: Record<string, unknown> = {
      key: debounceKey,
      name: reg.name,
      delay_ms: Math.round(debouncePeriodMs),
      inputs: inputs.value,
      serialization: inputs.serialization,
      ...firstCallFields(params, this.cfg.debounceTimeoutMs, this.cfg.applicationName),
    };
    if (reg.className) body.class_name = reg.className;
    body.deduplication_id = dedupIDOf(reg.className, reg.name, debounceKey);
    body.step_name = RECORDED_NAME;
    if (pinned) body.workflow_id = pinned;
    const user = params?.authenticatedUser ?? ctx?.authenticatedUser;
    const roles = params?.authenticatedRoles ?? ctx?.authenticatedRoles;
    if (user) body.authenticated_user = user;
    if (roles?.length) body.authenticated_roles = roles;
    if (ctx?.assumedRole) body.assumed_role = ctx.assumedRole;
    const handle = (id: string) => new AgentWorkflowHandle<Return>(() => requireEngine(), id);

    const run = e.currentRun();
    if (!run) {
      const reply = await e.request('debounce_workflow', body);
      return handle(reply.workflow_id as string);
    }
    // From workflow code: step N is the debounce, N+1 the workflow it created.
    const functionId = run.takeFunctionId();
    run.throwIfStopped();
    const recorded = e.replayed(run, functionId, RECORDED_NAME);
    if (recorded) {
      const result = (recorded.output ? DBOSPortableJSON.parse(recorded.output) : null) as DebounceResult | null;
      if (result?.bounced_workflow_id) return handle(result.bounced_workflow_id);
      if (result?.holder_workflow_id) throw deduplicated(pinned ?? '', params, debounceKey, reg.name, reg.className);
      const childId = run.takeFunctionId();
      const child = e.replayed(run, childId, reg.name);
      if (child?.child_workflow_id) return handle(child.child_workflow_id);
      throw new DBOSError(`Workflow ${run.workflowID} recorded a debounce at step ${functionId} without the workflow it created`);
    }
    let reply: Record<string, unknown>;
    try {
      reply = await run.conn.request('debounce_workflow', {
        ...body,
        caller: { workflow_id: run.workflowID, owner_xid: run.ownerXid, function_id: functionId },
      });
    } catch (err) {
      throw e.lostRun(run, err, RECORDED_NAME, functionId);
    }
    if (!reply.bounced) run.takeFunctionId();
    return handle(reply.workflow_id as string);
  }
}

/** A Debouncer for a client: the workflow is named, not referenced. */
export class DebouncerClient {
  private readonly cfg: DebouncerClientConfig & { workflowClassName: string };

  constructor(
    readonly client: DebounceClient,
    params: DebouncerClientConfig,
  ) {
    this.cfg = { ...params, workflowClassName: params.workflowClassName || '' };
  }

  async debounce(debounceKey: string, debouncePeriodMs: number, ...args: unknown[]): Promise<WorkflowHandle<unknown>> {
    checkPeriod(debouncePeriodMs);
    const params = this.cfg.startWorkflowParams;
    rejectConflictingOptions(params, false);
    const app = this.cfg.applicationName ?? params?.enqueueOptions?.applicationName ?? this.client.applicationName;
    const timeoutMS = typeof params?.timeoutMS === 'number' ? params.timeoutMS : undefined;
    const id = await this.client.enqueueDebounced(
      {
        workflowName: this.cfg.workflowName,
        workflowClassName: this.cfg.workflowClassName || undefined,
        queueName: params?.queueName ?? INTERNAL_QUEUE_NAME,
        workflowID: params?.workflowID,
        workflowTimeoutMS: timeoutMS,
        appVersion: params?.enqueueOptions?.appVersion,
        attributes: params?.workflowAttributes,
        authenticatedUser: params?.authenticatedUser,
        authenticatedRoles: params?.authenticatedRoles,
        deduplicationID: dedupIDOf(this.cfg.workflowClassName, this.cfg.workflowName, debounceKey),
        delaySeconds: debouncePeriodMs / 1000,
        serializationType: this.cfg.serializationType,
        applicationName: app,
      },
      this.cfg.debounceTimeoutMs ? Date.now() + this.cfg.debounceTimeoutMs : undefined,
      args,
    );
    return this.client.retrieveWorkflow(id);
  }
}
