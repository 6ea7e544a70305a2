/**
 * The engine of the binding: the link to the agent, the runs this process
 * executes, and the durable primitives every API call is built from (start a
 * workflow, run a step, record, await). DBOS's semantics live here once; the
 * DBOS class, the client and the other modules call these.
 *
 * A run comes from a `run` push or from the grant of a `start_workflow` with
 * `run_here` (PROTOCOL.md section 2.2). It numbers its operations from 0, as
 * DBOS TypeScript does; an operation whose function id is in the run's
 * history is replayed from it with no round trip; a new one is recorded and
 * the workflow goes on only once the agent says the record is durable.
 */
import { createHash, randomUUID } from 'node:crypto';
import { AgentLink, Connection, HelloReply } from './connection';
import { AgentErrorReply, Code, PROTOCOL_VERSION, WAKE_TIME_FORMAT } from './protocol';
import { DBOSContext, HistoryStep, RunState, StepStatus, currentContext, runWithContext } from './context';
import {
  DBOSAwaitedWorkflowCancelledError,
  DBOSAwaitedWorkflowExceededMaxRecoveryAttempts,
  DBOSError,
  DBOSInvalidWorkflowTransitionError,
  DBOSMaxRecoveryAttemptsExceededError,
  DBOSMaxStepRetriesError,
  DBOSNonExistentWorkflowError,
  DBOSNotRegisteredError,
  DBOSStepTimeoutError,
  DBOSUnexpectedStepError,
  DBOSWorkflowCancelledError,
  DBOSWorkflowConflictError,
  DBOSAgentUnavailableError,
  errorFromAgent,
} from './error';
import {
  DBOSJSON,
  DBOSPortableJSON,
  DBOSSerializer,
  deserializeArgs,
  deserializeError,
  deserializeValue,
  serializeArgs,
  serializeError,
  serializeErrorAs,
  serializeValue,
} from './serialization';
import { FunctionRegistration, allWorkflows, findInstance, findWorkflow, setWorkflowDeclaredHook } from './registry';
// Used at call time only, so the cycle through dbos.ts is harmless.
import { tickArgs } from './schedules';
import type { DBOSConfig, StartWorkflowParams, StepConfig, WorkflowStatus } from './types';
import { resolveEndpoint } from './transport';
import { DBOSSpan, Tracer, endWith } from './tracing';
import { LogIdentity, OTLPLogger } from './logger';
import type { DataSourceTransactionHandler } from './datasource';

/** The DBOS TypeScript release whose API and formats this binding mirrors. */
export const DBOS_TS_VERSION = '5.3.0';
export const BINDING_VERSION = '0.1.0';
export const INTERNAL_QUEUE_NAME = '_dbos_internal_queue';
const PORTABLE = DBOSPortableJSON.name();

/** A `Run` of the protocol (section 9). */
export interface RunMessage {
  workflow_id: string;
  name: string;
  class_name?: string;
  config_name?: string;
  inputs: string | null;
  serialization: string;
  owner_xid: string;
  queue_name?: string;
  deadline_epoch_ms?: number;
  recovery_attempts: number;
  authenticated_user?: string;
  assumed_role?: string;
  authenticated_roles?: string[];
  attributes?: string;
  history: HistoryStep[];
}

/** A `WorkflowResult` (section 9). */
export interface WorkflowResult {
  workflow_id: string;
  status: string;
  output: string | null;
  error: string | null;
  serialization?: string;
}

/** What a local run's promise settles to: its stored outcome, or that the run stopped without one. */
export type LocalOutcome = { result: WorkflowResult; thrown?: { error: unknown } } | { stopped: Error };

/** Extra hello fields and late registrations of other modules (queues). */
export interface HelloContributor {
  hello(body: Record<string, unknown>): void;
}

export class Engine {
  readonly config: DBOSConfig;
  readonly serializer: DBOSSerializer;
  readonly link: AgentLink;
  readonly role = 'worker' as const;
  appVersion = '';
  executorID = 'local';
  agent?: HelloReply;
  /** DBOS.tracer: spans around workflows and steps (stubs unless tracing is on). */
  tracer!: Tracer;
  /** DBOS.logger once launched with OTLP on (else DBOS's console logger or the configured one). */
  otlpLogger?: OTLPLogger;
  /** The runs executing in this process, by workflow id. */
  private readonly runs = new Map<string, RunState>();
  /** The outcome of runs started here, for handles that await them without a round trip. */
  private readonly local = new Map<string, Promise<LocalOutcome>>();
  private readonly contributors: HelloContributor[] = [];
  /** Workflows declared after launch, waiting for the next `register` (sent in one batch). */
  private pendingDeclarations: FunctionRegistration[] = [];
  private declaring?: Promise<void>;
  private stopping = false;
  /**
   * Runs pushed before DBOS.launch is done (the agent pushes recovered
   * workflows right after the hello): they start once the application's
   * instances are initialized and DBOS is usable from workflow code.
   */
  private held: Array<() => void> | undefined = [];

  constructor(config: DBOSConfig, contributors: HelloContributor[]) {
    this.config = config;
    this.serializer = config.serializer ?? DBOSJSON;
    this.contributors = contributors;
    this.link = new AgentLink({
      endpoint: resolveEndpoint({
        agentSocket: config.agentSocket,
        agentLibrary: config.agentLibrary,
        agentMode: config.agentMode,
        systemDatabaseUrl: config.systemDatabaseUrl,
        executorID: config.executorID,
        applicationVersion: config.applicationVersion,
        trustedUids: config.agentTrustedUids,
      }),
      hello: () => this.helloBody(),
      onPush: (op, body, conn) => this.onPush(op, body, conn),
      onConnected: (conn) => this.connected(conn),
      onDisconnected: (_conn, err) => this.disconnected(err),
      onRetry: (err, attempt) => {
        if (attempt === 1 || attempt % 20 === 0) console.warn(`dbos-agent: reconnecting (attempt ${attempt}): ${err.message}`);
      },
    });
  }

  get appName(): string {
    return this.config.name ?? '';
  }

  async launch(): Promise<void> {
    this.appVersion = computeAppVersion(this.config);
    this.agent = await this.link.open();
    this.executorID = this.agent.executor_id;
    if (this.agent.app_version) this.appVersion = this.agent.app_version;
    try {
      this.tracer = new Tracer({ ...this.config, appName: this.appName, appVersion: this.appVersion, executorID: this.executorID });
      if (!this.config.logger && (this.config.enableOTLP ?? process.env.DBOS__CLOUD === 'true')) {
        this.otlpLogger = new OTLPLogger(this.config, {
          appName: this.appName,
          appVersion: () => this.appVersion,
          applicationID: this.tracer.applicationID,
          executorID: () => this.executorID,
          activeSpan: () => this.tracer.activeSpan() as ReturnType<LogIdentity['activeSpan']>,
          stringify: (v) => DBOSJSON.stringify(v),
        });
      }
    } catch (err) {
      this.link.close();
      throw err;
    }
    setWorkflowDeclaredHook((reg) => this.declaredLate(reg));
  }

  /** Starts the runs pushed during launch, and every later one as it comes. */
  startRuns(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const go of held) go();
  }

  /** Stops taking runs and closes the link; runs in flight stop at their next step. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    setWorkflowDeclaredHook(undefined);
    const stop = new DBOSAgentUnavailableError('DBOS is shutting down');
    for (const run of this.runs.values()) run.halt(stop);
    this.link.close();
    await this.tracer?.shutdown();
    await this.otlpLogger?.shutdown();
  }

  private helloBody(): Record<string, unknown> {
    // What is declared while this hello is on its way goes in a register on the new connection.
    this.pendingDeclarations = [];
    const body: Record<string, unknown> = {
      min_version: PROTOCOL_VERSION,
      max_version: PROTOCOL_VERSION,
      role: 'worker',
      app_name: this.appName,
      app_version: this.appVersion,
      language: 'node',
      binding_version: BINDING_VERSION,
      pid: process.pid,
      workflows: workflowForms(allWorkflows()),
      wake_time_format: WAKE_TIME_FORMAT,
    };
    for (const c of this.contributors) c.hello(body);
    return body;
  }

  private async connected(conn: Connection): Promise<void> {
    const missed = this.pendingDeclarations.splice(0);
    if (missed.length) await conn.request('register', { workflows: workflowForms(missed) });
  }

  private disconnected(err: Error): void {
    // The runs' owner tokens are dead: the agent hands them to another worker.
    for (const run of this.runs.values()) run.halt(err);
  }

  /** A workflow declared after launch: the agent learns it with `register` before it is used. */
  private declaredLate(reg: FunctionRegistration): void {
    this.pendingDeclarations.push(reg);
    if (this.declaring) return;
    this.declaring = (async () => {
      // One microtask later: every declaration of a class body goes out together.
      await Promise.resolve();
      while (this.pendingDeclarations.length) {
        const batch = this.pendingDeclarations.splice(0, 4096);
        const conn = this.link.current;
        if (!conn) return; // the next hello carries them
        try {
          await conn.request('register', { workflows: workflowForms(batch) });
        } catch (err) {
          if (err instanceof DBOSAgentUnavailableError) return;
          console.error(`dbos-agent: could not register ${batch.length} workflow(s): ${(err as Error).message}`);
        }
      }
    })().finally(() => {
      this.declaring = undefined;
    });
  }

  /** Waits until what was declared so far is known to the agent. */
  async declarationsSent(): Promise<void> {
    while (this.declaring) await this.declaring;
  }

  addContributor(c: HelloContributor): void {
    this.contributors.push(c);
  }

  // ---- requests ------------------------------------------------------------

  async request(op: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>> {
    try {
      return await this.link.request(op, body, { signal });
    } catch (err) {
      throw mapError(err, body);
    }
  }

  // ---- pushes and runs -----------------------------------------------------

  private onPush(op: string, body: Record<string, unknown>, conn: Connection): void {
    if (op === 'run') {
      if (this.stopping) return; // the connection closes: the agent hands it back
      const go = () => void this.execute(body as unknown as RunMessage, conn, undefined);
      if (this.held) this.held.push(go);
      else go();
    } else if (op === 'cancel') {
      const id = body.workflow_id as string;
      this.runs.get(id)?.halt(new DBOSWorkflowCancelledError(id));
    }
  }

  /**
   * Runs a workflow here: from a push, or from a start's grant (then its
   * outcome promise is what the starter's handle awaits).
   */
  execute(run: RunMessage, conn: Connection, parentCtx: DBOSContext | undefined): Promise<LocalOutcome> {
    const outcome = this.executeRun(run, conn, parentCtx);
    this.local.set(run.workflow_id, outcome);
    void outcome.finally(() => {
      if (this.local.get(run.workflow_id) === outcome) this.local.delete(run.workflow_id);
    });
    return outcome;
  }

  private async executeRun(run: RunMessage, conn: Connection, parentCtx: DBOSContext | undefined): Promise<LocalOutcome> {
    const className = run.class_name ?? '';
    const configName = run.config_name ?? '';
    const state = new RunState(
      run.workflow_id,
      run.owner_xid,
      run.name,
      className,
      configName,
      run.history ?? [],
      run.serialization,
      conn,
      run.deadline_epoch_ms,
      run.authenticated_user,
      run.authenticated_roles,
      run.assumed_role,
      run.recovery_attempts,
    );
    const prior = this.runs.get(run.workflow_id);
    // A newer run of the same workflow supersedes the old one (the agent fenced it).
    prior?.halt(new DBOSWorkflowConflictError(run.workflow_id));
    this.runs.set(run.workflow_id, state);
    try {
      const reg = findWorkflow(className, run.name) ?? findWorkflowByName(run.name);
      let outcome: { output?: unknown; error?: unknown };
      if (!reg) {
        outcome = { error: new DBOSNotRegisteredError(run.name, `Workflow function ${run.name} is not registered`) };
      } else {
        outcome = await this.callWorkflow(reg, state, run, parentCtx);
      }
      if (state.stopped) return { stopped: state.stopped };
      // Another workflow's cancellation escaping this one (an invoked child's
      // handle throws it) is, as DBOS TS records it, an awaiter's error.
      if (outcome.error instanceof DBOSWorkflowCancelledError && outcome.error.workflowID !== state.workflowID) {
        outcome = { error: new DBOSAwaitedWorkflowCancelledError(outcome.error.workflowID) };
      }
      await this.deleteDataSourceCheckpoints(state);
      if (state.stopped) return { stopped: state.stopped };
      const portable = this.isPortable(state, reg);
      const { result, applied } = await this.finish(state, portable, outcome);
      // DBOS TS's handle of a run it executed throws the error the workflow threw, as thrown
      // (not its stored form), when the run recorded it in native serialization.
      if (applied && !portable && result.status === 'ERROR' && 'error' in outcome && outcome.error !== undefined) {
        return { result, thrown: { error: outcome.error } };
      }
      return { result };
    } catch (err) {
      // finish itself failed (the connection went away): the agent hands the workflow back.
      return { stopped: err as Error };
    } finally {
      if (this.runs.get(run.workflow_id) === state) this.runs.delete(run.workflow_id);
    }
  }

  private async callWorkflow(
    reg: FunctionRegistration,
    state: RunState,
    run: RunMessage,
    parentCtx: DBOSContext | undefined,
  ): Promise<{ output?: unknown; error?: unknown }> {
    const span = this.tracer.startSpan(reg.name, {
      status: 'PENDING',
      operationUUID: state.workflowID,
      operationType: 'workflow',
      operationName: reg.name,
      authenticatedUser: run.authenticated_user ?? parentCtx?.authenticatedUser ?? '',
      authenticatedRoles: run.authenticated_roles ?? parentCtx?.authenticatedRoles ?? [],
      assumedRole: run.assumed_role ?? '',
    });
    const outcome = await this.tracer.runWithSpan(span, () => this.callWorkflowCode(reg, state, run, parentCtx));
    endWith(this.tracer, span, state.stopped ?? outcome.error);
    return outcome;
  }

  private async callWorkflowCode(
    reg: FunctionRegistration,
    state: RunState,
    run: RunMessage,
    parentCtx: DBOSContext | undefined,
  ): Promise<{ output?: unknown; error?: unknown }> {
    try {
      let target: unknown = undefined;
      if (run.config_name) {
        target = findInstance(state.className, run.config_name);
        if (!target) {
          throw new DBOSNotRegisteredError(
            run.name,
            `Configured instance ${run.config_name} of class ${state.className} is not registered`,
          );
        }
      } else if (reg.ctor && !reg.isInstance) {
        target = reg.ctor;
      }
      let args = tickArgs(reg, run.workflow_id, run.serialization, await deserializeArgs(run.inputs, run.serialization, this.serializer));
      const schema = reg.workflowConfig?.inputSchema;
      if (schema) args = schema.parse(args) as unknown[];
      const ctx: DBOSContext = {
        run: state,
        authenticatedUser: run.authenticated_user ?? parentCtx?.authenticatedUser,
        authenticatedRoles: run.authenticated_roles ?? parentCtx?.authenticatedRoles,
        assumedRole: run.assumed_role,
      };
      const output = await runWithContext(ctx, () => reg.original.apply(target, args));
      return { output };
    } catch (error) {
      return { error };
    }
  }

  private isPortable(state: RunState, reg: FunctionRegistration | undefined): boolean {
    return state.serialization === PORTABLE || reg?.workflowConfig?.serialization === 'portable';
  }

  private async finish(
    state: RunState,
    portable: boolean,
    outcome: { output?: unknown; error?: unknown },
  ): Promise<{ result: WorkflowResult; applied: boolean }> {
    // The outcome is written under the workflow's own tag (its inputs'), as DBOS writes it.
    const format = portable ? 'portable' : undefined;
    const body: Record<string, unknown> = { workflow_id: state.workflowID, owner_xid: state.ownerXid };
    if ('error' in outcome && outcome.error !== undefined) {
      const ser = await serializeErrorAs(outcome.error, this.serializer, portable ? PORTABLE : state.serialization || null);
      body.status = 'ERROR';
      body.error = ser.value;
      body.serialization = ser.serialization;
    } else {
      const ser = await serializeValue(outcome.output, this.serializer, format);
      body.status = 'SUCCESS';
      body.output = ser.value;
      body.serialization = ser.serialization;
    }
    const reply = await state.conn.request('finish', body);
    return { result: reply.result as unknown as WorkflowResult, applied: reply.applied === true };
  }

  // ---- starting workflows --------------------------------------------------

  /**
   * Starts a workflow (DBOS.startWorkflow, a direct call, an enqueue): from
   * workflow code it is a child at the next function id, replayed from the
   * history when recorded.
   */
  async start(
    reg: FunctionRegistration,
    target: unknown,
    args: unknown[],
    params: StartWorkflowParams & { namedArgs?: Record<string, unknown> },
    reservedFunctionId?: number,
  ): Promise<StartedWorkflow> {
    const ctx = currentContext();
    const parent = ctx?.run && ctx.stepFunctionId === undefined ? ctx.run : undefined;
    if (ctx?.run && ctx.stepFunctionId !== undefined) {
      throw new DBOSInvalidWorkflowTransitionError('Invalid call to a `workflow` function from within a `step` or `transaction`');
    }
    const functionId = parent ? (reservedFunctionId ?? parent.takeFunctionId()) : undefined;
    let workflowID = params.workflowID ?? takeNextID(ctx);
    const queueName = params.queueName ?? ctx?.queueName;
    if (parent && functionId !== undefined) {
      parent.throwIfStopped();
      const recorded = parent.history.get(functionId);
      if (recorded) {
        if (recorded.child_workflow_id === undefined || recorded.name !== reg.name) {
          throw new DBOSUnexpectedStepError(parent.workflowID, functionId, reg.name, recorded.name);
        }
        return { workflowID: recorded.child_workflow_id, local: undefined };
      }
      workflowID = workflowID ?? `${parent.workflowID}-${functionId}`;
    }
    workflowID = workflowID ?? randomUUID();
    const instance = target !== undefined && typeof target !== 'function' ? (target as { name?: string }) : undefined;
    const format = reg.workflowConfig?.serialization;
    // Named arguments (enqueueWorkflowWithOptionsPortable) go in portable JSON only, as in DBOS.
    const inputs = await serializeArgs(args, this.serializer, format, params.namedArgs);
    const body: Record<string, unknown> = {
      workflow_id: workflowID,
      name: reg.name,
      class_name: reg.className || undefined,
      config_name: instance?.name,
      inputs: inputs.value,
      serialization: inputs.serialization,
      attributes: params.workflowAttributes ? JSON.stringify(params.workflowAttributes) : undefined,
      authenticated_user: params.authenticatedUser ?? ctx?.authenticatedUser,
      authenticated_roles: params.authenticatedRoles ?? ctx?.authenticatedRoles,
      assumed_role: ctx?.assumedRole,
      workflow_id_reuse_policy: params.workflowIDReusePolicy,
    };
    const timeoutMS = params.timeoutMS !== undefined ? params.timeoutMS : ctx?.workflowTimeoutMS;
    if (typeof timeoutMS === 'number') body.timeout_ms = Math.round(timeoutMS);
    else if (timeoutMS !== null && parent?.deadlineEpochMS !== undefined) body.deadline_epoch_ms = parent.deadlineEpochMS;
    const enqueue = params.enqueueOptions;
    if (queueName) {
      body.queue_name = queueName;
      body.priority = enqueue?.priority;
      body.deduplication_id = enqueue?.deduplicationID;
      body.partition_key = enqueue?.queuePartitionKey;
      body.application_name = enqueue?.applicationName;
      body.app_version = enqueue?.appVersion;
      if (enqueue?.delaySeconds !== undefined) body.delay_ms = Math.round(enqueue.delaySeconds * 1000);
      if (params.duplicationPolicy === 'return-existing') body.deduplication_policy = 'return_existing';
    } else {
      const set = (['deduplicationID', 'priority', 'queuePartitionKey', 'delaySeconds', 'applicationName'] as const).filter(
        (k) => enqueue?.[k] !== undefined,
      );
      if (set.length) {
        throw new DBOSError(
          `Enqueue option(s) ${set.join(', ')} set on a workflow that is not being enqueued. ` +
            'These options are only supported when enqueueing a workflow onto a queue.',
        );
      }
      body.app_version = enqueue?.appVersion;
      body.run_here = true;
    }
    if (parent && functionId !== undefined) {
      body.parent = { workflow_id: parent.workflowID, owner_xid: parent.ownerXid, function_id: functionId };
    }
    await this.declarationsSent();
    const conn = parent ? parent.conn : await this.link.connection();
    let reply: Record<string, unknown>;
    try {
      reply = await conn.request('start_workflow', body);
    } catch (err) {
      throw this.stopIfLost(parent, mapError(err, body));
    }
    const id = reply.workflow_id as string;
    const grant = reply.run as RunMessage | undefined;
    const local = grant ? this.execute(grant, conn, ctx) : undefined;
    return { workflowID: id, local };
  }

  /** Halts the parent when an error means its run lost the workflow; returns the error. */
  private stopIfLost(run: RunState | undefined, err: Error): Error {
    if (run && (err instanceof DBOSWorkflowCancelledError || err instanceof DBOSWorkflowConflictError)) run.halt(err);
    return err;
  }

  // ---- steps ----------------------------------------------------------------

  /**
   * Runs fn as a step of the current workflow, with DBOS's retries and
   * timeout, recorded durably; outside a workflow (or inside a step) it is
   * an ordinary call, as in DBOS.
   */
  async runStep<R>(fn: () => Promise<R> | R, name: string, config: StepConfig): Promise<R> {
    const ctx = currentContext();
    if (!ctx?.run || ctx.stepFunctionId !== undefined) return await fn();
    const run = ctx.run;
    const functionId = run.takeFunctionId();
    run.throwIfStopped();
    const stepConfig = {
      retriesAllowed: config.retriesAllowed,
      intervalSeconds: config.intervalSeconds,
      maxAttempts: config.maxAttempts,
      backoffRate: config.backoffRate,
      timeoutMS: config.timeoutMS,
    };
    return this.inOperationSpan(ctx, name, 'step', stepConfig, (span) => this.stepBody(fn, name, config, ctx, run, functionId, span));
  }

  /** Runs body in a span of its own for an operation of the current run (a step, a transaction), ended with its outcome. */
  private async inOperationSpan<R>(
    ctx: DBOSContext,
    name: string,
    operationType: string,
    attributes: Record<string, unknown>,
    body: (span: DBOSSpan) => Promise<R>,
  ): Promise<R> {
    const span = this.tracer.startSpan(name, {
      operationUUID: ctx.run!.workflowID,
      operationType,
      operationName: name,
      authenticatedUser: ctx.authenticatedUser ?? '',
      assumedRole: ctx.assumedRole ?? '',
      authenticatedRoles: ctx.authenticatedRoles ?? [],
      ...attributes,
    });
    try {
      const value = await body(span);
      endWith(this.tracer, span);
      return value;
    } catch (err) {
      endWith(this.tracer, span, err);
      throw err;
    }
  }

  private async stepBody<R>(
    fn: () => Promise<R> | R,
    name: string,
    config: StepConfig,
    ctx: DBOSContext,
    run: RunState,
    functionId: number,
    span: DBOSSpan,
  ): Promise<R> {
    const recorded = this.replayed(run, functionId, name);
    if (recorded) return (await this.revive(recorded)) as R;
    const startedAt = Date.now();
    let result: { value: R } | undefined;
    let failure: unknown;
    const maxAttempts = config.maxAttempts ?? 3;
    const attempt = async (attemptNum: number | undefined): Promise<R> => {
      const timeoutAbort = config.timeoutMS === undefined ? undefined : new AbortController();
      const status: StepStatus = {
        stepID: functionId,
        currentAttempt: attemptNum,
        maxAttempts: attemptNum ? maxAttempts : undefined,
        timeoutSignal: timeoutAbort?.signal,
        cancelSignal: run.stop.signal,
      };
      const body = this.tracer.runWithSpan(span, () =>
        runWithContext({ ...ctx, stepFunctionId: functionId, stepStatus: status }, async () => await fn()),
      );
      if (config.timeoutMS === undefined) return await body;
      const timeoutError = new DBOSStepTimeoutError(name, config.timeoutMS);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timeoutAbort!.abort(timeoutError);
          reject(timeoutError);
        }, config.timeoutMS);
      });
      try {
        return await Promise.race([body, timeout]);
      } finally {
        clearTimeout(timer);
      }
    };
    if (config.retriesAllowed) {
      const errors: Error[] = [];
      let interval = config.intervalSeconds ?? 1;
      for (let n = 1; n <= maxAttempts; n++) {
        run.throwIfStopped();
        try {
          result = { value: await attempt(n) };
          break;
        } catch (err) {
          run.throwIfStopped();
          if (config.shouldRetry) {
            let retry: boolean;
            try {
              retry = await config.shouldRetry(err);
            } catch (predicateError) {
              span.addEvent(`Step retry predicate failed after attempt ${n}`, {
                error: (err as Error)?.message,
                shouldRetryError: (predicateError as Error)?.message,
              });
              failure = predicateError;
              break;
            }
            if (!retry) {
              span.addEvent(`Step attempt ${n} failed`, { retryIntervalSeconds: interval, error: (err as Error)?.message, shouldRetry: false });
              failure = err;
              break;
            }
          }
          span.addEvent(`Step attempt ${n} failed`, { retryIntervalSeconds: interval, error: (err as Error)?.message });
          errors.push(err as Error);
          console.warn(`Error in step being automatically retried. Attempt ${n} of ${maxAttempts}. ${(err as Error)?.stack ?? err}`);
          if (n < maxAttempts) {
            await interruptibleSleep(interval * 1000, run.stop.signal);
            run.throwIfStopped();
            interval = Math.min(interval * (config.backoffRate ?? 2), 3600);
          }
        }
      }
      if (!result && failure === undefined) failure = new DBOSMaxStepRetriesError(name, maxAttempts, errors);
    } else {
      try {
        result = { value: await attempt(undefined) };
      } catch (err) {
        run.throwIfStopped();
        failure = err;
      }
    }
    const completedAt = Date.now();
    if (result) {
      const ser = await serializeValue(result.value, this.serializer, undefined);
      await this.record(run, {
        function_id: functionId,
        name,
        output: ser.value,
        serialization: ser.serialization,
        started_at_epoch_ms: startedAt,
        completed_at_epoch_ms: completedAt,
      });
      // The step returns what a replay would: the value as stored.
      return (await deserializeValue(ser.value, ser.serialization, this.serializer)) as R;
    }
    const ser = await serializeError(failure, this.serializer, undefined);
    await this.record(run, {
      function_id: functionId,
      name,
      error: ser.value,
      serialization: ser.serialization,
      started_at_epoch_ms: startedAt,
      completed_at_epoch_ms: completedAt,
    });
    throw failure;
  }

  // ---- data source transactions ----------------------------------------------

  /**
   * A data source's transaction in workflow code: a step at the next
   * function id (no retries: a data source retries its own serialization
   * failures), replayed from the history, run with DBOS.isInTransaction()
   * set. The data source is noted as used before the replay check, so that
   * a replayed run still deletes an earlier run's checkpoints when it ends.
   */
  async runTransaction<R>(ds: DataSourceTransactionHandler, name: string, fn: () => Promise<R>): Promise<R> {
    const ctx = currentContext()!;
    const run = ctx.run!;
    run.usedDataSources.add(ds);
    const functionId = run.takeFunctionId();
    run.throwIfStopped();
    const body = async (): Promise<R> => {
      try {
        return await fn();
      } catch (err) {
        // A stale run's fencing error is not the step's outcome: the run stops, recording nothing.
        if (err instanceof DBOSWorkflowConflictError) run.halt(err);
        throw err;
      }
    };
    const txCtx = { ...ctx, inTransaction: true };
    return this.inOperationSpan(ctx, name, 'transaction', {}, (span) => this.stepBody(body, name, {}, txCtx, run, functionId, span));
  }

  /** Whether ownerXid still owns the workflow (a data source's fencing check). */
  async ownsWorkflow(workflowID: string, ownerXid: string): Promise<boolean> {
    const info = await this.request('get_workflow', { workflow_id: workflowID, check_owner_xid: ownerXid });
    return info.owner_matches === true;
  }

  /**
   * Deletes the checkpoints of the data sources a finishing run used (its
   * step records cover them), each delete committing only while the run
   * still owns the workflow. Best effort, as in DBOS: a leftover checkpoint
   * is harmless, so a failure is logged; once the workflow has another
   * owner, the checkpoints are that run's and are left alone.
   */
  private async deleteDataSourceCheckpoints(run: RunState): Promise<void> {
    const stillOwner = async (): Promise<void> => {
      if (!(await this.ownsWorkflow(run.workflowID, run.ownerXid))) throw new DBOSWorkflowConflictError(run.workflowID);
    };
    for (const ds of run.usedDataSources) {
      if (!ds.deleteCheckpoints) continue;
      try {
        await ds.deleteCheckpoints(run.workflowID, 0, stillOwner);
      } catch (err) {
        if (err instanceof DBOSWorkflowConflictError) return;
        (this.otlpLogger ?? console).warn(`Failed to delete data source ${ds.name} checkpoints of workflow ${run.workflowID}: ${(err as Error)?.message ?? err}`);
      }
    }
  }

  /** The history's record at functionId, checked against the operation's name (DBOS's non-determinism check). */
  replayed(run: RunState, functionId: number, name: string): HistoryStep | undefined {
    const recorded = run.history.get(functionId);
    if (recorded && recorded.name !== name) {
      throw new DBOSUnexpectedStepError(run.workflowID, functionId, name, recorded.name);
    }
    return recorded;
  }

  /** What a recorded step returns on replay: its output, or its error thrown. */
  async revive(step: { output: string | null; error: string | null; serialization?: string }): Promise<unknown> {
    if (step.error !== null && step.error !== undefined) {
      throw await deserializeError(step.error, step.serialization ?? null, this.serializer);
    }
    return deserializeValue(step.output ?? null, step.serialization ?? null, this.serializer);
  }

  /** Records a step of run and waits until it is durable; a lost run stops here. */
  async record(run: RunState, step: Partial<HistoryStep> & { function_id: number; name: string }): Promise<void> {
    run.throwIfStopped();
    try {
      await run.conn.request('record_step', { workflow_id: run.workflowID, owner_xid: run.ownerXid, ...step });
    } catch (err) {
      throw this.lostRun(run, err, step.name, step.function_id);
    }
  }

  /** Maps an error of a request made for run; cancellation and fencing stop the run. */
  lostRun(run: RunState, err: unknown, name: string, functionId: number): Error {
    if (err instanceof AgentErrorReply) {
      if (err.code === Code.workflow_cancelled) {
        const e = new DBOSWorkflowCancelledError(run.workflowID);
        run.halt(e);
        return e;
      }
      if (err.code === Code.fenced) {
        const e = new DBOSWorkflowConflictError(run.workflowID);
        run.halt(e);
        return e;
      }
      if (err.code === Code.unexpected_step) {
        return new DBOSUnexpectedStepError(run.workflowID, functionId, name, String(err.data?.recorded ?? '?'));
      }
      return errorFromAgent(err.wire, { workflowID: run.workflowID });
    }
    if (err instanceof DBOSAgentUnavailableError) run.halt(err);
    return err as Error;
  }

  // ---- results --------------------------------------------------------------

  /** Waits for a workflow's outcome (a handle's getResult, DBOS.getResult). */
  async awaitResult(workflowID: string, timeoutMS?: number): Promise<WorkflowResult | null> {
    const local = this.local.get(workflowID);
    if (local && timeoutMS === undefined) {
      const outcome = await local;
      if ('result' in outcome && isTerminal(outcome.result.status)) return outcome.result;
    }
    const body: Record<string, unknown> = { workflow_id: workflowID };
    if (timeoutMS !== undefined) body.timeout_ms = Math.max(1, Math.round(timeoutMS));
    try {
      return (await this.request('get_result', body)) as unknown as WorkflowResult;
    } catch (err) {
      if (timeoutMS !== undefined && err instanceof AgentTimeout) return null;
      throw err;
    }
  }

  /** Waits for a workflow to end, giving up (cancel_request) when signal fires. */
  async awaitResultSignal(workflowID: string, signal: AbortSignal): Promise<WorkflowResult> {
    const local = this.local.get(workflowID);
    if (local) {
      const outcome = await local;
      if ('result' in outcome && isTerminal(outcome.result.status)) return outcome.result;
    }
    return (await this.request('get_result', { workflow_id: workflowID }, signal)) as unknown as WorkflowResult;
  }

  /** A stored outcome as the awaiting caller sees it: the value, or the error thrown. */
  outcome<T>(result: WorkflowResult): Promise<T> {
    return outcomeOf<T>(result, this.serializer);
  }

  /**
   * getResult from workflow code: step N `DBOS.getResult` records the
   * awaited outcome, replayed from the history after a recovery.
   */
  async durableResult<T>(workflowID: string, reservedFunctionId?: number, invoked?: Promise<LocalOutcome>): Promise<T> {
    const ctx = currentContext();
    const run = ctx?.run && ctx.stepFunctionId === undefined ? ctx.run : undefined;
    if (!run) {
      const { result, thrown } = await this.invokedResult(workflowID, invoked);
      if (thrown) throw thrown.error;
      return this.outcome<T>(result);
    }
    const functionId = reservedFunctionId ?? run.takeFunctionId();
    run.throwIfStopped();
    const recorded = this.replayed(run, functionId, 'DBOS.getResult');
    if (recorded) return (await this.revive(recorded)) as T;
    const startedAt = Date.now();
    const { result, thrown } = await this.invokedResult(workflowID, invoked);
    const step: Partial<HistoryStep> & { function_id: number; name: string } = {
      function_id: functionId,
      name: 'DBOS.getResult',
      child_workflow_id: workflowID,
      started_at_epoch_ms: startedAt,
      completed_at_epoch_ms: Date.now(),
    };
    if (result.status === 'SUCCESS') {
      step.output = result.output;
      step.serialization = result.serialization;
    } else if (result.status === 'ERROR') {
      step.error = result.error;
      step.serialization = result.serialization;
    } else {
      // What the handle throws is recorded, so a replay throws it again.
      const err =
        thrown?.error ??
        (result.status === 'CANCELLED' ? new DBOSAwaitedWorkflowCancelledError(workflowID) : new DBOSAwaitedWorkflowExceededMaxRecoveryAttempts(workflowID));
      const ser = await serializeError(err, this.serializer, undefined);
      step.error = ser.value;
      step.serialization = ser.serialization;
    }
    await this.record(run, step);
    if (thrown) throw thrown.error;
    return this.outcome<T>(result);
  }

  /**
   * The outcome a handle awaits: for a run this process executed (DBOS TS's
   * InvokedHandle), the run's own, with the error as thrown; else the stored one.
   */
  private async invokedResult(
    workflowID: string,
    invoked: Promise<LocalOutcome> | undefined,
  ): Promise<{ result: WorkflowResult; thrown?: { error: unknown } }> {
    if (!invoked) return { result: (await this.awaitResult(workflowID))! };
    const outcome = await invoked;
    const result = 'result' in outcome && isTerminal(outcome.result.status) ? outcome.result : (await this.awaitResult(workflowID))!;
    // DBOS TS's handle of a run it executed reports a cancelled or
    // dead-lettered outcome as the workflow's own (DBOSWorkflowCancelledError,
    // DBOSMaxRecoveryAttemptsExceededError), not as an awaiter's.
    if (result.status === 'CANCELLED') return { result, thrown: { error: new DBOSWorkflowCancelledError(workflowID) } };
    if (result.status === 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') return { result, thrown: { error: new DBOSMaxRecoveryAttemptsExceededError(workflowID) } };
    return 'result' in outcome && outcome.result === result ? outcome : { result };
  }

  getStatus(workflowID: string): Promise<WorkflowStatus | null> {
    return fetchStatus(this, workflowID);
  }

  /** A `WorkflowInfo` as DBOS TypeScript's WorkflowStatus. */
  toStatus(info: Record<string, unknown>): Promise<WorkflowStatus> {
    return toStatus(info, this.serializer);
  }

  /** The run of the workflow code calling now (not a step), or undefined. */
  currentRun(): RunState | undefined {
    const ctx = currentContext();
    return ctx?.run && ctx.stepFunctionId === undefined ? ctx.run : undefined;
  }
}

/**
 * What the status, outcome and management functions need of a connection:
 * requests with errors mapped to DBOS's classes, and the serializer that
 * decodes payloads. The worker's Engine and DBOSClient both are one.
 */
export interface Requester {
  request(op: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>>;
  readonly serializer: DBOSSerializer;
  /** The application the caller acts for: DBOS scopes its listings to it by default. */
  readonly appName?: string;
  /** The connection's role (PROTOCOL.md section 2.1): a client may act for another application. */
  readonly role?: 'client' | 'worker';
}

/** A workflow's status (with its payloads unless told otherwise), or null when no workflow has the id. */
export async function fetchStatus(req: Requester, workflowID: string, loadPayloads = true): Promise<WorkflowStatus | null> {
  try {
    const info = await req.request('get_workflow', { workflow_id: workflowID, load_payloads: loadPayloads || undefined });
    return await toStatus(info, req.serializer);
  } catch (err) {
    // By class: DBOS's errors keep the name 'Error'.
    if (err instanceof DBOSNonExistentWorkflowError) return null;
    throw err;
  }
}

/** A `WorkflowInfo` as DBOS TypeScript's WorkflowStatus. */
export async function toStatus(info: Record<string, unknown>, serializer: DBOSSerializer): Promise<WorkflowStatus> {
  const ser = (info.serialization as string | undefined) ?? null;
  const attributes = info.attributes ? (JSON.parse(info.attributes as string) as Record<string, unknown>) : undefined;
  let input: unknown[] | undefined;
  let output: unknown;
  let error: unknown;
  if (info.inputs !== undefined) input = await deserializeArgs(info.inputs as string, ser, serializer).catch(() => undefined);
  if (info.output !== undefined) output = await deserializeValue(info.output as string, ser, serializer).catch(() => info.output);
  if (info.error !== undefined) error = await deserializeError(info.error as string, ser, serializer).catch(() => info.error);
  return {
    workflowID: info.workflow_id as string,
    status: info.status as string,
    workflowName: info.name as string,
    workflowClassName: (info.class_name as string) ?? '',
    workflowConfigName: (info.config_name as string) ?? '',
    queueName: info.queue_name as string | undefined,
    authenticatedUser: info.authenticated_user as string | undefined,
    assumedRole: info.assumed_role as string | undefined,
    authenticatedRoles: info.authenticated_roles as string[] | undefined,
    input,
    output,
    error,
    executorId: info.executor_id as string | undefined,
    applicationVersion: info.app_version as string | undefined,
    applicationName: info.app_name as string | undefined,
    createdAt: info.created_at_epoch_ms as number,
    updatedAt: info.updated_at_epoch_ms as number | undefined,
    timeoutMS: info.timeout_ms as number | undefined,
    deadlineEpochMS: info.deadline_epoch_ms as number | undefined,
    deduplicationID: info.deduplication_id as string | undefined,
    priority: (info.priority as number | undefined) ?? 0,
    queuePartitionKey: info.partition_key as string | undefined,
    dequeuedAt: info.started_at_epoch_ms as number | undefined,
    delayUntilEpochMS: info.delay_until_epoch_ms as number | undefined,
    completedAt: info.completed_at_epoch_ms as number | undefined,
    forkedFrom: info.forked_from as string | undefined,
    wasForkedFrom: (info.was_forked_from as boolean | undefined) ?? false,
    parentWorkflowID: info.parent_workflow_id as string | undefined,
    attributes,
    scheduleName: info.schedule_name as string | undefined,
    recoveryAttempts: info.recovery_attempts as number | undefined,
  };
}

/** A stored outcome as the awaiting caller sees it: the value, or the error thrown. */
export async function outcomeOf<T>(result: WorkflowResult, serializer: DBOSSerializer): Promise<T> {
  switch (result.status) {
    case 'SUCCESS':
      return (await deserializeValue(result.output, result.serialization ?? null, serializer)) as T;
    case 'ERROR':
      throw await deserializeError(result.error ?? '', result.serialization ?? null, serializer);
    case 'CANCELLED':
      throw new DBOSAwaitedWorkflowCancelledError(result.workflow_id);
    case 'MAX_RECOVERY_ATTEMPTS_EXCEEDED':
      throw new DBOSAwaitedWorkflowExceededMaxRecoveryAttempts(result.workflow_id);
    default:
      throw new DBOSError(`Workflow ${result.workflow_id} has status ${result.status}, not an outcome`);
  }
}

export interface StartedWorkflow {
  workflowID: string;
  /** The outcome of the run here, when this process was granted it. */
  local: Promise<LocalOutcome> | undefined;
}

/** The timeout answer of a bounded wait, told apart from real failures. */
export class AgentTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AgentTimeout';
  }
}

/** Maps a request's failure to the error DBOS raises for it. */
export function mapError(err: unknown, body: Record<string, unknown>): Error {
  if (err instanceof AgentErrorReply) {
    if (err.code === Code.timeout) return new AgentTimeout(err.message);
    return errorFromAgent(err.wire, {
      workflowID: (body.workflow_id as string | undefined) ?? undefined,
      queueName: body.queue_name as string | undefined,
      deduplicationID: body.deduplication_id as string | undefined,
    });
  }
  return err as Error;
}

function isTerminal(status: string): boolean {
  return status === 'SUCCESS' || status === 'ERROR' || status === 'CANCELLED' || status === 'MAX_RECOVERY_ATTEMPTS_EXCEEDED';
}

function takeNextID(ctx: DBOSContext | undefined): string | undefined {
  const id = ctx?.nextWorkflowID;
  if (id !== undefined && ctx) ctx.nextWorkflowID = undefined;
  return id;
}

function findWorkflowByName(name: string): FunctionRegistration | undefined {
  return allWorkflows().find((r) => r.name === name);
}

/**
 * The registrations of a hello or register: the agent dispatches on the name
 * alone and takes each name once, while classes may share a method name
 * (`wf` of two classes); the run's class_name picks the method here. Same
 * names are announced once, with the largest max_recovery_attempts (0: the
 * default, 100) so that none is dead-lettered before its own limit.
 */
function workflowForms(regs: FunctionRegistration[]): Record<string, unknown>[] {
  const byName = new Map<string, Record<string, unknown>>();
  for (const reg of regs) {
    const form = workflowForm(reg);
    const prior = byName.get(reg.name);
    if (!prior) {
      byName.set(reg.name, form);
      continue;
    }
    const limit = (f: Record<string, unknown>) => (f.max_recovery_attempts as number | undefined) ?? 100;
    if (limit(form) > limit(prior)) prior.max_recovery_attempts = form.max_recovery_attempts;
  }
  return [...byName.values()];
}

function workflowForm(reg: FunctionRegistration): Record<string, unknown> {
  const form: Record<string, unknown> = { name: reg.name };
  if (reg.className) form.class_name = reg.className;
  const attempts = reg.workflowConfig?.maxRecoveryAttempts;
  if (attempts !== undefined && attempts > 0) form.max_recovery_attempts = Math.min(attempts, 2 ** 31 - 1);
  return form;
}

/**
 * The application version as DBOS TypeScript computes it (an MD5 of the
 * sorted sources of its workflows, its own release and the application's
 * name), so this binding and DBOS TypeScript running the same code are one
 * version and recover each other's workflows. The configuration or
 * DBOS__APPVERSION overrides it.
 */
export function computeAppVersion(config: DBOSConfig): string {
  if (config.applicationVersion) return config.applicationVersion;
  if (process.env.DBOS__APPVERSION) return process.env.DBOS__APPVERSION;
  if (config.enablePatching) return 'PATCHING_ENABLED';
  const hasher = createHash('md5');
  const sources = allWorkflows()
    .map((r) => r.original.toString())
    .sort();
  sources.push(DBOS_TS_VERSION, config.name ?? '');
  for (const s of sources) hasher.update(s);
  return hasher.digest('hex');
}

/** A sleep that a run's stop interrupts. */
export function interruptibleSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
