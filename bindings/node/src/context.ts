/**
 * The ambient context of workflow code, carried across awaits by
 * AsyncLocalStorage as DBOS TypeScript carries its own: which run a call
 * belongs to, whether it is inside a step, and the options the `DBOS.with...`
 * blocks set for the next start.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Connection } from './connection';
import type { DataSourceTransactionHandler } from './datasource';

/** A step recorded in a run's history (PROTOCOL.md section 9, `Step`). */
export interface HistoryStep {
  function_id: number;
  name: string;
  output: string | null;
  error: string | null;
  serialization?: string;
  child_workflow_id?: string;
  started_at_epoch_ms?: number;
  completed_at_epoch_ms?: number;
}

/** What DBOS.stepStatus gives a step's code. */
export interface StepStatus {
  stepID: number;
  currentAttempt?: number;
  maxAttempts?: number;
  timeoutSignal?: AbortSignal;
  cancelSignal?: AbortSignal;
}

/** One attempt at running a workflow in this process (a `Run` of the protocol). */
export class RunState {
  /** The next function id; DBOS TypeScript numbers a workflow's operations from 0. */
  nextFunctionId = 0;
  /** Why the run must stop (cancelled, fenced, connection lost), once it must. */
  stopped?: Error;
  readonly stop = new AbortController();
  /** The recorded operations, by function id. */
  readonly history: Map<number, HistoryStep>;
  /** The data sources whose transactions this run called: their checkpoints are deleted when it ends. */
  readonly usedDataSources = new Set<DataSourceTransactionHandler>();

  constructor(
    readonly workflowID: string,
    readonly ownerXid: string,
    readonly name: string,
    readonly className: string,
    readonly configName: string,
    history: HistoryStep[],
    /** The workflow's serialization tag (its inputs'), the default for its outcome. */
    readonly serialization: string,
    readonly conn: Connection,
    readonly deadlineEpochMS: number | undefined,
    readonly authenticatedUser: string | undefined,
    readonly authenticatedRoles: string[] | undefined,
    readonly assumedRole: string | undefined,
    readonly recoveryAttempts: number,
  ) {
    this.history = new Map(history.map((s) => [s.function_id, s]));
  }

  takeFunctionId(): number {
    return this.nextFunctionId++;
  }

  /** Stops the run: its next step boundary raises `why`; nothing more is recorded. */
  halt(why: Error): void {
    if (this.stopped) return;
    this.stopped = why;
    this.stop.abort(why);
  }

  throwIfStopped(): void {
    if (this.stopped) throw this.stopped;
  }
}

export interface DBOSContext {
  run?: RunState;
  /** Set inside a step: its function id (a step's id 0 is a step like any other). */
  stepFunctionId?: number;
  /** Inside a data source's transaction (a step, to everything else: stepFunctionId is its id). */
  inTransaction?: boolean;
  stepStatus?: StepStatus;
  /** DBOS.withNextWorkflowID: the id of the next workflow started in this block (used once). */
  nextWorkflowID?: string;
  /** DBOS.withWorkflowQueue */
  queueName?: string;
  /** DBOS.withWorkflowTimeout; null detaches a child from its parent's deadline. */
  workflowTimeoutMS?: number | null;
  /** DBOS.withAuthedContext, or the run's. */
  authenticatedUser?: string;
  authenticatedRoles?: string[];
  assumedRole?: string;
}

const storage = new AsyncLocalStorage<DBOSContext>();

export function currentContext(): DBOSContext | undefined {
  return storage.getStore();
}

export function runWithContext<R>(ctx: DBOSContext, fn: () => R): R {
  return storage.run(ctx, fn);
}

/** Runs fn in a copy of the current context with `changes` applied. */
export function runWithChanges<R>(changes: Partial<DBOSContext>, fn: () => R): R {
  return storage.run({ ...(storage.getStore() ?? {}), ...changes }, fn);
}

/** The run whose workflow code (not a step) is running now, if any. */
export function currentWorkflowRun(): RunState | undefined {
  const ctx = storage.getStore();
  if (!ctx?.run || ctx.stepFunctionId !== undefined) return undefined;
  return ctx.run;
}

/** Takes the id DBOS.withNextWorkflowID set, once. */
export function takeAssignedWorkflowID(): string | undefined {
  const ctx = storage.getStore();
  const id = ctx?.nextWorkflowID;
  if (id !== undefined) ctx!.nextWorkflowID = undefined;
  return id;
}
