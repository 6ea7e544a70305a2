/**
 * `DBOS`: DBOS TypeScript 5.x's static API, served by the agent. The
 * semantics are the engine's (runtime.ts); this class holds the
 * application's configuration, the registration of its functions, and the
 * ambient-context blocks, and forwards the rest to the modules of each area
 * (comm, management, queues, schedules).
 */
import { execFile } from 'node:child_process';
import { randomUUID as nodeRandomUUID } from 'node:crypto';
import { currentContext, runWithChanges } from './context';
import {
  DBOSError,
  DBOSInvalidWorkflowTransitionError,
  DBOSNotRegisteredError,
  DBOSInvalidQueuePriorityError,
} from './error';
import {
  AnyCtor,
  AnyFn,
  FunctionRegistration,
  allInstances,
  allWorkflows,
  bindWrapper,
  classInfoFor,
  externalInfo,
  functionInfoFor,
  classNameOf,
  clearRegistry,
  declareWorkflow,
  nameClass,
  registerInstance,
  registrationOf,
} from './registry';
import { Engine, HelloContributor, StartedWorkflow } from './runtime';
import { JSONValue, registerSerializationRecipe, SerializationRecipe, serializeError, serializeValue } from './serialization';
import type {
  DBOSConfig,
  DBOSLaunchOptions,
  FunctionName,
  GetResultOptions,
  PollingOptions,
  StartWorkflowParams,
  StepConfig,
  WorkflowConfig,
  WorkflowHandle,
  WorkflowStatus,
} from './types';
import { AgentWorkflowHandle } from './workflow';
import type { DBOSSpan, Tracer } from './tracing';
import * as comm from './comm';
import { clearDataSources, registeredDataSources } from './datasource';
import type { StepStatus } from './context';
import { DLogger, makeLogger } from './logger';
import * as mgmt from './management';
import * as queues from './queues';
import * as schedules from './schedules';

export const DBOS_QUEUE_MIN_PRIORITY = 0;
export const DBOS_QUEUE_MAX_PRIORITY = 2 ** 31 - 1;

let config: DBOSConfig | undefined;
let engine: Engine | undefined;
let logger: DLogger = makeLogger(undefined);
/** Other modules' hello fields (queues), installed before launch. */
const contributors: HelloContributor[] = [];
interface LifecycleCallback {
  initialize?: () => Promise<void> | void;
  destroy?: () => Promise<void> | void;
  logRegisteredEndpoints?: () => void;
}
const lifecycle: LifecycleCallback[] = [];
let alertHandler: ((name: string, message: string, metadata: Record<string, string>) => Promise<void>) | undefined;

/** The running engine; DBOS's TypeError when DBOS has not been launched. */
export function requireEngine(reason = 'workflows'): Engine {
  if (!engine) throw new TypeError(`\`DBOS.launch()\` must be called before running ${reason}.`);
  return engine;
}

export function maybeEngine(): Engine | undefined {
  return engine;
}

export function addHelloContributor(c: HelloContributor): void {
  contributors.push(c);
}

function handleFor<R>(workflowID: string, invoked?: StartedWorkflow['local']): AgentWorkflowHandle<R> {
  return new AgentWorkflowHandle<R>(() => requireEngine(), workflowID, invoked);
}

/** Starts reg's workflow and gives its handle (the run is granted here when it is not enqueued). */
async function startRegistered<R>(
  reg: FunctionRegistration,
  target: unknown,
  args: unknown[],
  params: StartWorkflowParams,
  reservedFunctionId?: number,
): Promise<WorkflowHandle<R>> {
  const e = requireEngine();
  checkTarget(reg, target);
  if (params.duplicationPolicy === 'return-existing') {
    if (!params.queueName) throw new DBOSInvalidWorkflowTransitionError("`duplicationPolicy: 'return-existing'` requires a `queueName`");
    if (!params.enqueueOptions?.deduplicationID) {
      throw new DBOSInvalidWorkflowTransitionError("`duplicationPolicy: 'return-existing'` requires `enqueueOptions.deduplicationID`");
    }
  }
  const priority = params.enqueueOptions?.priority;
  if ((params.queueName ?? currentContext()?.queueName) && priority !== undefined && (priority < DBOS_QUEUE_MIN_PRIORITY || priority > DBOS_QUEUE_MAX_PRIORITY)) {
    throw new DBOSInvalidQueuePriorityError(priority, DBOS_QUEUE_MIN_PRIORITY, DBOS_QUEUE_MAX_PRIORITY);
  }
  validateAttributes(params.workflowAttributes);
  const started = await e.start(reg, target, args, params, reservedFunctionId);
  return handleFor<R>(started.workflowID, started.local);
}

function checkTarget(reg: FunctionRegistration, target: unknown): void {
  if (reg.isInstance && !(target instanceof ConfiguredInstance)) {
    throw new DBOSInvalidWorkflowTransitionError(
      'Attempt to call a `workflow` function on an object that is not a `ConfiguredInstance`',
    );
  }
}

/** DBOS TypeScript's validateWorkflowAttributes (workflow.js), with its messages. */
function validateAttributes(attributes: unknown): void {
  if (attributes === undefined || attributes === null) return;
  if (typeof attributes !== 'object' || Array.isArray(attributes)) {
    throw new DBOSError(
      `Invalid workflow attributes: must be a key-value object, got ${Array.isArray(attributes) ? 'array' : typeof attributes}.`,
    );
  }
  let serialized: string;
  try {
    serialized = JSON.stringify(attributes);
  } catch (e) {
    throw new DBOSError(`Invalid workflow attributes: must be JSON-serializable. ${(e as Error).message}`);
  }
  if (serialized === '{}' && Object.keys(attributes).length > 0) {
    throw new DBOSError('Invalid workflow attributes: object has no JSON-serializable properties.');
  }
}

/** The function a registered workflow is called through: a direct call starts it and awaits it. */
function workflowInvoker(reg: FunctionRegistration): AnyFn {
  const invoker = async function (this: unknown, ...args: unknown[]) {
    const e = requireEngine('workflows');
    const run = e.currentRun();
    if (run) {
      // Two ids, taken before any await: the start, then the await.
      const startId = run.takeFunctionId();
      const resultId = run.takeFunctionId();
      const handle = await startRegistered(reg, this, args, {}, startId);
      return (handle as AgentWorkflowHandle<unknown>).getResult(resultId);
    }
    const handle = await startRegistered(reg, this, args, {});
    return handle.getResult();
  };
  bindWrapper(invoker, reg);
  return invoker;
}

function stepInvoker(reg: FunctionRegistration, config: StepConfig): AnyFn {
  const invoker = async function (this: unknown, ...args: unknown[]) {
    requireEngine('steps');
    if (reg.isInstance && this !== undefined && typeof this !== 'function' && !(this instanceof ConfiguredInstance)) {
      throw new DBOSInvalidWorkflowTransitionError('Attempt to call a `step` function on an object that is not a `ConfiguredInstance`');
    }
    return requireEngine().runStep(() => reg.original.apply(this, args), reg.name, config);
  };
  bindWrapper(invoker, reg);
  return invoker;
}

/** DBOS TypeScript's validateStepConfig (step.js): only timeoutMS is checked, with its message. */
function validateStepConfig(config: StepConfig, name: string): void {
  const timeoutMS = config.timeoutMS;
  if (timeoutMS !== undefined && (typeof timeoutMS !== 'number' || !Number.isFinite(timeoutMS) || timeoutMS <= 0)) {
    throw new DBOSError(`Invalid timeoutMS (${timeoutMS}) in configuration of step ${name}: must be a positive number`);
  }
}

/** A class whose instance methods are workflows and steps, found again by its name on recovery. */
export abstract class ConfiguredInstance {
  readonly name: string;

  constructor(name: string) {
    this.name = name;
    registerInstance(this, classNameOf(this.constructor as AnyCtor), name);
  }

  /** Override for async set-up between construction and DBOS.launch(). */
  initialize(): Promise<void> {
    return Promise.resolve();
  }
}

type PossiblyWFFunc = (...args: any[]) => Promise<unknown>; // eslint-disable-line @typescript-eslint/no-explicit-any
type InvokeFunctionsAsync<T> = {
  [P in keyof T]: T[P] extends PossiblyWFFunc
    ? (...args: Parameters<T[P]>) => Promise<WorkflowHandle<Awaited<ReturnType<T[P]>>>>
    : never;
};

export class DBOS {
  // ---- lifecycle ------------------------------------------------------------

  static setConfig(c: DBOSConfig): void {
    config = { ...c };
    logger = makeLogger(config);
  }

  static isInitialized(): boolean {
    return engine !== undefined;
  }

  static async launch(options?: DBOSLaunchOptions): Promise<void> {
    if (engine) return;
    if (options?.conductorKey) {
      // The conductor manages one executor and its system database; here that is the agent, shared by the host.
      throw new DBOSError('DBOS Conductor is not reached through the dbos-agent: launch without conductorKey (the agent owns the executor)');
    }
    const c = config ?? {};
    const e = new Engine(c, [...contributors]);
    await e.launch();
    engine = e;
    // Before any run starts (recovered ones included), as DBOS does: their transactions need them.
    for (const ds of registeredDataSources()) await ds.initialize();
    for (const inst of allConfiguredInstances()) await inst.initialize();
    for (const l of lifecycle) await l.initialize?.();
    e.startRuns();
  }

  static async shutdown(_options?: { deregister?: boolean; workflowCompletionTimeoutMS?: number }): Promise<void> {
    const e = engine;
    if (!e) return;
    for (const l of [...lifecycle].reverse()) await l.destroy?.();
    engine = undefined;
    await e.shutdown();
    for (const ds of registeredDataSources()) await ds.destroy();
  }

  static registerLifecycleCallback(l: LifecycleCallback): void {
    if (!lifecycle.includes(l)) lifecycle.push(l);
  }

  /** Forgets every registration (DBOS's test helper). */
  static clearRegistry(): void {
    clearRegistry();
    clearDataSources();
    lifecycle.length = 0;
    alertHandler = undefined;
  }

  static get logger(): DLogger {
    return engine?.otlpLogger ?? logger;
  }

  /** DBOS's tracer, for starting spans (once launched; its spans are stubs unless tracing is on). */
  static get tracer(): Tracer | undefined {
    return engine?.tracer;
  }

  /** The active tracing span, when tracing is on. */
  static get span(): DBOSSpan | undefined {
    return engine?.tracer.activeSpan();
  }

  /**
   * Migrates a system database with the agent's own migrator (`dbos-agent
   * migrate`): the schema the agent serves is the one its migrations create.
   * The binary is DBOS_AGENT_BINARY's, else `dbos-agent` on PATH.
   */
  static async migrate(systemDatabaseUrl: string, options?: { schemaName?: string; applicationRole?: string }): Promise<void> {
    const args = ['migrate', '--database-url', systemDatabaseUrl];
    if (options?.schemaName) args.push('--schema', options.schemaName);
    if (options?.applicationRole) args.push('--app-role', options.applicationRole);
    const binary = process.env.DBOS_AGENT_BINARY || 'dbos-agent';
    await new Promise<void>((resolve, reject) => {
      execFile(binary, args, (err, _stdout, stderr) => {
        if (!err) return resolve();
        const detail = (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? `no dbos-agent binary was found: put it on PATH or name it in DBOS_AGENT_BINARY`
          : stderr.trim() || err.message;
        reject(new DBOSError(`DBOS migrations failed: ${detail}`));
      });
    });
  }

  /** Logs the registered workflows (and what lifecycle callbacks list). */
  static logRegisteredEndpoints(): void {
    logger.info('Workflows registered:');
    for (const reg of allWorkflows()) logger.info(`    ${reg.className ? reg.className + '.' : ''}${reg.name}`);
    for (const l of lifecycle) l.logRegisteredEndpoints?.();
  }

  static associateClassWithInfo(external: AnyCtor | object | string, cls: AnyCtor | string): object {
    return classInfoFor(external, cls);
  }

  static associateFunctionWithInfo<This, Args extends unknown[], Return>(
    external: AnyCtor | object | string,
    func: (this: This, ...args: Args) => Promise<Return>,
    target: FunctionName,
  ): { registration: FunctionRegistration; regInfo: object } {
    return functionInfoFor(external, func as AnyFn, target);
  }

  static getAssociatedInfo(external: AnyCtor | object | string, cls?: object | string, funcName?: string) {
    return externalInfo(external, cls as AnyCtor | object | string | undefined, funcName);
  }

  /**
   * Alerts come from DBOS Conductor, which an agent does not connect to: the
   * handler is kept (DBOS's rules: once, before launch) and never called.
   */
  static setAlertHandler(handler: (name: string, message: string, metadata: Record<string, string>) => Promise<void>): void {
    if (engine) throw new DBOSError('Cannot set alert handler after DBOS.launch()');
    if (alertHandler) throw new DBOSError('Alert handler is already registered. Only one handler is allowed.');
    alertHandler = handler;
  }

  static get applicationVersion(): string {
    return requireEngine('this').appVersion;
  }

  static get executorID(): string {
    return requireEngine('this').executorID;
  }

  // ---- context ---------------------------------------------------------------

  static get workflowID(): string | undefined {
    return currentContext()?.run?.workflowID;
  }

  static get stepID(): number | undefined {
    return currentContext()?.stepFunctionId;
  }

  static get stepStatus(): StepStatus | undefined {
    const ctx = currentContext();
    return ctx?.inTransaction ? undefined : ctx?.stepStatus;
  }

  static get authenticatedUser(): string {
    return currentContext()?.authenticatedUser ?? '';
  }

  static get authenticatedRoles(): string[] {
    return currentContext()?.authenticatedRoles ?? [];
  }

  static get assumedRole(): string {
    return currentContext()?.assumedRole ?? '';
  }

  static isInTransaction(): boolean {
    return currentContext()?.inTransaction === true;
  }

  static isInStep(): boolean {
    const ctx = currentContext();
    return ctx?.run !== undefined && ctx.stepFunctionId !== undefined && !ctx.inTransaction;
  }

  static isWithinWorkflow(): boolean {
    return currentContext()?.run !== undefined;
  }

  static isInWorkflow(): boolean {
    const ctx = currentContext();
    return ctx?.run !== undefined && ctx.stepFunctionId === undefined;
  }

  static withNextWorkflowID<R>(workflowID: string, callback: () => Promise<R>): Promise<R> {
    return runWithChanges({ nextWorkflowID: workflowID }, callback);
  }

  static withAuthedContext<R>(authedUser: string, authedRoles: string[], callback: () => Promise<R>): Promise<R> {
    return runWithChanges({ authenticatedUser: authedUser, authenticatedRoles: authedRoles }, callback);
  }

  static withNamedContext<R>(_callerName: string, callback: () => Promise<R>): Promise<R> {
    return callback();
  }

  static withWorkflowQueue<R>(queueName: string, callback: () => Promise<R>): Promise<R> {
    return runWithChanges({ queueName }, callback);
  }

  static withWorkflowTimeout<R>(timeoutMS: number | null, callback: () => Promise<R>): Promise<R> {
    return runWithChanges({ workflowTimeoutMS: timeoutMS }, callback);
  }

  // ---- registration ---------------------------------------------------------

  static className(name: string): <T extends new (...args: any[]) => object>(ctor: T) => void { // eslint-disable-line @typescript-eslint/no-explicit-any
    return (ctor) => nameClass(ctor as unknown as AnyCtor, name);
  }

  static workflow(cfg: WorkflowConfig = {}) {
    return function <This, Args extends unknown[], Return>(
      target: object,
      propertyKey: string,
      descriptor: TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>>,
    ): TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>> {
      if (!descriptor.value) throw new Error('Use of decorator when original method is undefined');
      const isStatic = typeof target === 'function';
      const ctor = (isStatic ? target : target.constructor) as AnyCtor;
      const reg = new FunctionRegistration(cfg.name ?? propertyKey, descriptor.value as AnyFn, ctor, !isStatic, undefined);
      reg.workflowConfig = cfg;
      declareWorkflow(reg);
      descriptor.value = workflowInvoker(reg) as (this: This, ...args: Args) => Promise<Return>;
      return descriptor;
    };
  }

  static registerWorkflow<This, Args extends unknown[], Return>(
    func: (this: This, ...args: Args) => Promise<Return>,
    cfg?: FunctionName & WorkflowConfig,
  ): (this: This, ...args: Args) => Promise<Return> {
    const name = cfg?.name ?? func.name;
    const target = cfg?.ctorOrProto;
    const isStatic = typeof target === 'function';
    const ctor = target ? ((isStatic ? target : (target as object).constructor) as AnyCtor) : undefined;
    const reg = new FunctionRegistration(name, func as AnyFn, ctor, target !== undefined && !isStatic, cfg?.className);
    reg.workflowConfig = cfg ?? {};
    declareWorkflow(reg);
    return workflowInvoker(reg) as (this: This, ...args: Args) => Promise<Return>;
  }

  static step(cfg: StepConfig = {}) {
    return function <This, Args extends unknown[], Return>(
      target: object,
      propertyKey: string,
      descriptor: TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>>,
    ): TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>> {
      if (!descriptor.value) throw new Error('Use of decorator when original method is undefined');
      const isStatic = typeof target === 'function';
      const name = cfg.name ?? propertyKey;
      const ctor = (isStatic ? target : target.constructor) as AnyCtor;
      validateStepConfig(cfg, `${classNameOf(ctor)}.${name}`);
      const reg = new FunctionRegistration(name, descriptor.value as AnyFn, ctor, !isStatic, undefined);
      reg.stepConfig = cfg;
      descriptor.value = stepInvoker(reg, cfg) as (this: This, ...args: Args) => Promise<Return>;
      return descriptor;
    };
  }

  static registerStep<This, Args extends unknown[], Return>(
    func: (this: This, ...args: Args) => Promise<Return>,
    cfg: StepConfig & FunctionName = {},
  ): (this: This, ...args: Args) => Promise<Return> {
    const name = cfg.name ?? func.name;
    validateStepConfig(cfg, name);
    const reg = new FunctionRegistration(name, func as AnyFn, undefined, false, cfg.className);
    reg.stepConfig = cfg;
    return stepInvoker(reg, cfg) as (this: This, ...args: Args) => Promise<Return>;
  }

  static runStep<Return>(func: () => Promise<Return>, cfg: StepConfig & { name?: string } = {}): Promise<Return> {
    const e = requireEngine('steps');
    const name = cfg.name ?? func.name;
    // As DBOS TS: checked when it runs as a step; outside a workflow it is a plain call.
    if (e.currentRun()) validateStepConfig(cfg, name);
    return e.runStep(func, name, cfg);
  }

  static registerSerialization<T, S extends JSONValue>(recipe: SerializationRecipe<T, S>): void {
    if (engine) throw new TypeError('Serializers/deserializers should not be registered after DBOS.launch()');
    registerSerializationRecipe(recipe);
  }

  // ---- starting and awaiting -----------------------------------------------

  static startWorkflow<Args extends unknown[], Return>(
    target: (...args: Args) => Promise<Return>,
    params?: StartWorkflowParams,
  ): (...args: Args) => Promise<WorkflowHandle<Return>>;
  static startWorkflow<T extends ConfiguredInstance>(target: T, params?: StartWorkflowParams): InvokeFunctionsAsync<T>;
  static startWorkflow<T extends object>(targetClass: T, params?: StartWorkflowParams): InvokeFunctionsAsync<T>;
  static startWorkflow(target: unknown, params: StartWorkflowParams = {}): unknown {
    if (typeof target === 'function') {
      const reg = registrationOf(target);
      if (reg?.workflowConfig) {
        return (...args: unknown[]) => startRegistered(reg, undefined, args, params);
      }
      if (!reg && !isClass(target)) {
        throw new DBOSNotRegisteredError(target.name, `${target.name} is not a registered DBOS workflow function`);
      }
      if (reg?.stepConfig) {
        throw new DBOSInvalidWorkflowTransitionError(`Attempt to start or enqueue step '${reg.name}'; only workflows can be started or enqueued`);
      }
    }
    // A class (its static workflows) or a configured instance (its instance workflows).
    const owner = target as Record<string, unknown>;
    return new Proxy(
      {},
      {
        get(_t, prop: string) {
          const method = owner[prop];
          const reg = registrationOf(method);
          if (!reg?.workflowConfig) {
            throw new DBOSNotRegisteredError(String(prop), `${String(prop)} is not a registered DBOS workflow function`);
          }
          return (...args: unknown[]) => startRegistered(reg, owner, args, params);
        },
      },
    );
  }

  static retrieveWorkflow<T = unknown>(workflowID: string): WorkflowHandle<Awaited<T>> {
    return handleFor<Awaited<T>>(workflowID);
  }

  static getWorkflowStatus(workflowID: string): Promise<WorkflowStatus | null> {
    return handleFor(workflowID).getStatus();
  }

  /** The workflow's outcome; null when `timeoutSeconds` passes first. */
  static async getResult<T>(workflowID: string, options?: number | GetResultOptions): Promise<T | null> {
    const e = requireEngine();
    const timeoutSec = typeof options === 'number' ? options : options?.timeoutSeconds;
    const deadline = typeof options === 'object' ? options.deadlineEpochMS : undefined;
    const timeoutMS = deadline !== undefined ? Math.max(0, deadline - Date.now()) : timeoutSec !== undefined ? timeoutSec * 1000 : undefined;
    const run = e.currentRun();
    if (run) {
      // As DBOS TS: the timer's id first (step DBOS.sleep, the wait's durable deadline), then the getResult's.
      const timerId = timeoutMS !== undefined ? run.takeFunctionId() : undefined;
      const functionId = run.takeFunctionId();
      run.throwIfStopped();
      const recorded = e.replayed(run, functionId, 'DBOS.getResult');
      if (recorded) return (await e.revive(recorded)) as T | null;
      const startedAt = Date.now();
      let waitMS = timeoutMS;
      if (timerId !== undefined) {
        try {
          const reply = await run.conn.request('sleep', {
            caller: { workflow_id: run.workflowID, owner_xid: run.ownerXid, function_id: timerId },
            duration_ms: Math.max(0, Math.round(timeoutMS!)),
          });
          waitMS = Number(reply.remaining_ms ?? 0);
        } catch (err) {
          throw e.lostRun(run, err, 'DBOS.sleep', timerId);
        }
      }
      const result = waitMS !== undefined && waitMS <= 0 ? await e.awaitResult(workflowID, 1) : await e.awaitResult(workflowID, waitMS);
      const step = { function_id: functionId, name: 'DBOS.getResult', child_workflow_id: workflowID, started_at_epoch_ms: startedAt };
      if (!result) {
        await e.record(run, { ...step, output: await nullOutput(e), completed_at_epoch_ms: Date.now() });
        return null;
      }
      let error = result.status === 'ERROR' ? result.error : null;
      let serialization = result.serialization;
      if (result.status !== 'SUCCESS' && result.status !== 'ERROR') {
        // Cancelled or dead-lettered: recorded as the error DBOS raises for it, so a replay raises it too.
        const raised = await e.outcome(result).then(() => undefined, (err: unknown) => err);
        const ser = await serializeError(raised, e.serializer, undefined);
        error = ser.value;
        serialization = ser.serialization;
      }
      await e.record(run, {
        ...step,
        output: result.status === 'SUCCESS' ? result.output : null,
        error,
        serialization,
        completed_at_epoch_ms: Date.now(),
      });
      return e.outcome<T>(result);
    }
    const result = await e.awaitResult(workflowID, timeoutMS);
    if (!result) return null;
    return e.outcome<T>(result);
  }

  static async waitFirst(handles: WorkflowHandle<unknown>[], _options?: PollingOptions): Promise<WorkflowHandle<unknown>> {
    if (handles.length === 0) throw new DBOSError('waitFirst requires at least one handle');
    const e = requireEngine();
    const pick = async () => {
      const abort = new AbortController();
      try {
        const ids = await Promise.race(
          handles.map((h) => e.awaitResultSignal(h.workflowID, abort.signal).then(() => h.workflowID)),
        );
        return ids;
      } finally {
        abort.abort(new Error('waitFirst: another workflow ended first'));
      }
    };
    const winner = e.currentRun() ? await e.runStep(pick, 'DBOS.waitFirst', {}) : await pick();
    return handles.find((h) => h.workflowID === winner)!;
  }

  static async waitAll<R>(handles: WorkflowHandle<R>[], _options?: PollingOptions): Promise<WorkflowHandle<R>[]> {
    const e = requireEngine();
    const all = async () => {
      await Promise.all(handles.map((h) => e.awaitResult(h.workflowID)));
      return null;
    };
    if (e.currentRun()) await e.runStep(all, 'DBOS.waitAll', {});
    else await all();
    return handles;
  }

  // ---- communication: messages, events, streams, sleep, patches (comm.ts) ----

  /** Sends message to the workflow destinationID on topic (durable from workflow code: step `DBOS.send`). */
  static send<T>(destinationID: string, message: T, topic?: string, idempotencyKey?: string, options?: comm.SendOptions): Promise<void> {
    return comm.send(destinationID, message, topic, idempotencyKey, options);
  }

  /** The oldest message on topic to this workflow, or null after the timeout (60 s unless given). */
  static recv<T>(topic?: string, options?: number | comm.RecvOptions): Promise<T | null> {
    return comm.recv<T>(topic, options);
  }

  /** Publishes value under key of this workflow (step `DBOS.setEvent`). */
  static setEvent<T>(key: string, value: T, options?: comm.SetEventOptions): Promise<void> {
    return comm.setEvent(key, value, options);
  }

  /** A workflow's event, waiting for it to be set; null after the timeout (60 s unless given). */
  static getEvent<T>(workflowID: string, key: string, options?: number | comm.GetEventOptions): Promise<T | null> {
    return comm.getEvent<T>(workflowID, key, options);
  }

  /** Appends value to this workflow's stream key (from workflow code or a step). */
  static writeStream<T>(key: string, value: T, options?: comm.WriteStreamOptions): Promise<void> {
    return comm.writeStream(key, value, options);
  }

  /** Closes this workflow's stream key (from workflow code or a step). */
  static closeStream(key: string): Promise<void> {
    return comm.closeStream(key);
  }

  /** A workflow's stream, value by value, until it is closed or the workflow ends. */
  static readStream<T>(workflowID: string, key: string, options?: comm.ReadStreamOptions): AsyncGenerator<T, void, unknown> {
    return comm.readStream<T>(workflowID, key, options);
  }

  /** The value at offset of a workflow's stream, waiting for it; DBOSStreamTimeoutError if none comes. */
  static readStreamOffset<T>(workflowID: string, key: string, offset: number, options?: comm.ReadStreamOffsetOptions): Promise<T> {
    return comm.readStreamOffset<T>(workflowID, key, offset, options);
  }

  /** Sleeps durationMS; from workflow code the wake time is durable (step `DBOS.sleep`). */
  static sleepms(durationMS: number): Promise<void> {
    return comm.sleepms(durationMS);
  }

  static sleepSeconds(durationSec: number): Promise<void> {
    return comm.sleepms(durationSec * 1000);
  }

  static sleep(durationMS: number): Promise<void> {
    return comm.sleepms(durationMS);
  }

  /** Whether this run takes the patched path of patchName (requires `enablePatching`). */
  static patch(patchName: string): Promise<boolean> {
    return comm.patch(patchName);
  }

  /** patch's successor while the unpatched path is retired: always true. */
  static deprecatePatch(patchName: string): Promise<boolean> {
    return comm.deprecatePatch(patchName);
  }

  // ---- workflow management and versions (management.ts) ----

  /** The workflows matching the filter (step `DBOS.listWorkflows` from workflow code). */
  static async listWorkflows(input: mgmt.GetWorkflowsInput): Promise<WorkflowStatus[]> {
    const e = requireEngine('listWorkflows');
    return await e.runStep(() => mgmt.listWorkflows(e, input), 'DBOS.listWorkflows', {});
  }

  static async listQueuedWorkflows(input: mgmt.GetWorkflowsInput): Promise<WorkflowStatus[]> {
    const e = requireEngine('listQueuedWorkflows');
    return await e.runStep(() => mgmt.listQueuedWorkflows(e, input), 'DBOS.listQueuedWorkflows', {});
  }

  static async setWorkflowPriority(workflowID: string, priority: number): Promise<void> {
    const e = requireEngine('setWorkflowPriority');
    mgmt.checkPriority(priority);
    return await e.runStep(() => mgmt.setWorkflowPriority(e, workflowID, priority), 'DBOS.setWorkflowPriority', {});
  }

  static async setWorkflowDelay(workflowID: string, options: number | mgmt.SetWorkflowDelayOptions): Promise<void> {
    const e = requireEngine('setWorkflowDelay');
    const until = mgmt.resolveDelayEpochMS(options);
    return await e.runStep(() => mgmt.setWorkflowDelay(e, workflowID, until), 'DBOS.setWorkflowDelay', {});
  }

  static async listWorkflowSteps(workflowID: string, options?: mgmt.ListWorkflowStepsOptions): Promise<mgmt.StepInfo[] | undefined> {
    const e = requireEngine('listWorkflowSteps');
    return await e.runStep(() => mgmt.listWorkflowSteps(e, workflowID, options), 'DBOS.listWorkflowSteps', {});
  }

  /** Cancels a workflow: a running one stops at its next step, its awaiters get DBOSAwaitedWorkflowCancelledError. */
  static async cancelWorkflow(workflowID: string, options?: mgmt.CancelWorkflowsOptions): Promise<void> {
    return await DBOS.cancelWorkflows([workflowID], options);
  }

  static async cancelWorkflows(workflowIDs: string[], options?: mgmt.CancelWorkflowsOptions): Promise<void> {
    const e = requireEngine('cancelWorkflows');
    return await e.runStep(() => mgmt.cancelWorkflows(e, workflowIDs, options), 'DBOS.cancelWorkflow', {});
  }

  static async resumeWorkflow<T>(workflowID: string, options?: { queueName?: string }): Promise<WorkflowHandle<Awaited<T>>> {
    const [handle] = await DBOS.resumeWorkflows<T>([workflowID], options);
    return handle;
  }

  static async resumeWorkflows<T>(workflowIDs: string[], options?: { queueName?: string }): Promise<WorkflowHandle<Awaited<T>>[]> {
    const e = requireEngine('resumeWorkflows');
    await e.runStep(() => mgmt.resumeWorkflows(e, workflowIDs, options?.queueName), 'DBOS.resumeWorkflow', {});
    return workflowIDs.map((id) => DBOS.retrieveWorkflow<T>(id));
  }

  static async deleteWorkflow(workflowID: string, deleteChildren = false): Promise<void> {
    return await DBOS.deleteWorkflows([workflowID], deleteChildren);
  }

  static async deleteWorkflows(workflowIDs: string[], deleteChildren = false): Promise<void> {
    const e = requireEngine('deleteWorkflows');
    return await e.runStep(() => mgmt.deleteWorkflows(e, workflowIDs, deleteChildren), 'DBOS.deleteWorkflow', {});
  }

  /** A new workflow from this one's steps below startStep (the fork's id is chosen inside the step). */
  static async forkWorkflow<T>(workflowID: string, startStep: number, options?: mgmt.ForkWorkflowOptions): Promise<WorkflowHandle<Awaited<T>>> {
    const e = requireEngine('forkWorkflow');
    const forkedID = await e.runStep(() => mgmt.forkWorkflow(e, workflowID, startStep, options), 'DBOS.forkWorkflow', {});
    return DBOS.retrieveWorkflow<T>(forkedID);
  }

  static async rewindWorkflow<T>(workflowID: string, options?: mgmt.RewindWorkflowOptions): Promise<WorkflowHandle<Awaited<T>>> {
    const e = requireEngine('rewindWorkflow');
    await e.runStep(() => mgmt.rewindWorkflow(e, workflowID, options, registeredDataSources()), 'DBOS.rewindWorkflow', {});
    return DBOS.retrieveWorkflow<T>(workflowID);
  }

  /** The application's versions, the latest first (not a step, as in DBOS). */
  static async listApplicationVersions(): Promise<mgmt.VersionInfo[]> {
    return await mgmt.listApplicationVersions(requireEngine('listApplicationVersions'));
  }

  static async getLatestApplicationVersion(): Promise<mgmt.VersionInfo> {
    return await mgmt.getLatestApplicationVersion(requireEngine('getLatestApplicationVersion'));
  }

  static async setLatestApplicationVersion(versionName: string, options?: { applicationName?: string }): Promise<void> {
    return await mgmt.setLatestApplicationVersion(requireEngine('setLatestApplicationVersion'), versionName, options);
  }

  // ---- queues, schedules and debouncing (queues.ts, schedules.ts, debouncer.ts) ----

  static {
    // The queues module reads listenQueues and adds its hello fields; the
    // schedules module creates 4.x's declared schedules at launch.
    queues.installQueues({ config: () => config, addHelloContributor });
    DBOS.registerLifecycleCallback({
      initialize: async () => {
        await schedules.launchSchedules();
        // Every stored queue of the application, within listenQueues, is served here (as in DBOS 5.x).
        await queues.startQueueReconciler();
      },
      destroy: () => queues.stopQueueReconciler(),
    });
  }

  /** Registers a queue (its row in the queues table) and serves it from this process. */
  static registerQueue(name: string, options?: queues.RegisterQueueOptions): Promise<queues.WorkflowQueue> {
    return queues.registerQueue(name, options);
  }

  /** The queue's stored configuration, or null when it has no row. */
  static retrieveQueue(name: string): Promise<queues.WorkflowQueue | null> {
    return queues.retrieveQueue(name);
  }

  static deleteQueue(name: string): Promise<void> {
    return queues.deleteQueue(name);
  }

  /** The queues of these applications (default: this one's). */
  static listQueues(applicationName?: string | string[]): Promise<queues.WorkflowQueue[]> {
    return queues.listQueues(applicationName);
  }

  /** Enqueues a workflow by name, without a reference to its function. */
  static enqueueWorkflowWithOptions<T = unknown>(options: queues.EnqueueWorkflowOptions, ...args: unknown[]): Promise<WorkflowHandle<T>> {
    return queues.enqueueWorkflowWithOptions<T>(options, args);
  }

  static enqueueWorkflowWithOptionsPortable<T = unknown>(
    options: queues.EnqueueWorkflowOptions,
    positionalArgs: unknown[],
    namedArgs?: Record<string, unknown>,
  ): Promise<WorkflowHandle<T>> {
    return queues.enqueueWorkflowWithOptions<T>({ serializationType: 'portable', ...options }, positionalArgs, namedArgs);
  }

  static createSchedule(options: {
    scheduleName: string;
    workflowFn: schedules.ScheduledWorkflowFn;
    schedule: string;
    context?: unknown;
    options?: schedules.ScheduleOptions;
  }): Promise<void> {
    return schedules.createSchedule(options);
  }

  static listSchedules(filters?: {
    applicationName?: string | string[];
    status?: string | string[];
    workflowName?: string | string[];
    scheduleNamePrefix?: string | string[];
  }): Promise<schedules.WorkflowSchedule[]> {
    return schedules.listSchedules(filters);
  }

  static getSchedule(name: string): Promise<schedules.WorkflowSchedule | null> {
    return schedules.getSchedule(name);
  }

  static deleteSchedule(name: string): Promise<void> {
    return schedules.deleteSchedule(name);
  }

  static pauseSchedule(name: string): Promise<void> {
    return schedules.pauseSchedule(name);
  }

  static resumeSchedule(name: string): Promise<void> {
    return schedules.resumeSchedule(name);
  }

  static updateSchedule(
    name: string,
    updates: { schedule?: string; context?: unknown; automaticBackfill?: boolean; cronTimezone?: string | null; queueName?: string | null },
  ): Promise<void> {
    return schedules.updateSchedule(name, updates);
  }

  static applySchedules(
    list: Array<{
      scheduleName: string;
      workflowFn: schedules.ScheduledWorkflowFn;
      schedule: string;
      context?: unknown;
      automaticBackfill?: boolean;
      cronTimezone?: string;
      queueName?: string;
    }>,
  ): Promise<void> {
    return schedules.applySchedules(list);
  }

  static triggerSchedule(name: string): Promise<WorkflowHandle<unknown>> {
    return schedules.triggerSchedule(name);
  }

  static backfillSchedule(name: string, start: Date, end: Date): Promise<WorkflowHandle<unknown>[]> {
    return schedules.backfillSchedule(name, start, end);
  }

  /**
   * DBOS TypeScript 4.x's scheduled workflow (5.x dropped it): the workflow
   * runs at every tick of `crontab` with (scheduledTime, startTime), from a
   * schedule named after it that launch creates or brings up to date.
   */
  static registerScheduled<This, Return>(
    func: (this: This, ...args: schedules.ScheduledArgs) => Promise<Return>,
    cfg: schedules.SchedulerConfig & FunctionName,
  ): void {
    schedules.registerScheduled(func, cfg);
  }

  /** 4.x's `@DBOS.scheduled` decorator, on a static workflow method (see registerScheduled). */
  static scheduled(cfg: schedules.SchedulerConfig) {
    return function <This, Return>(
      target: object,
      propertyKey: PropertyKey,
      descriptor: TypedPropertyDescriptor<(this: This, ...args: schedules.ScheduledArgs) => Promise<Return>>,
    ) {
      if (descriptor.value) schedules.registerScheduled(descriptor.value, { ...cfg, ctorOrProto: target, name: String(propertyKey) });
      return descriptor;
    };
  }

  /** The time, durable from workflow code (step `DBOS.now`). */
  static async now(): Promise<number> {
    const e = engine;
    if (e?.currentRun()) return e.runStep(async () => Date.now(), 'DBOS.now', {});
    return Date.now();
  }

  /** A UUID, durable from workflow code (step `DBOS.randomUUID`). */
  static async randomUUID(): Promise<string> {
    const e = engine;
    if (e?.currentRun()) return e.runStep(async () => nodeRandomUUID(), 'DBOS.randomUUID', {});
    return nodeRandomUUID();
  }
}

function isClass(fn: unknown): boolean {
  return typeof fn === 'function' && /^class[\s{]/.test(Function.prototype.toString.call(fn));
}

async function nullOutput(e: Engine): Promise<string | null> {
  return (await serializeValue(null, e.serializer, undefined)).value;
}

function allConfiguredInstances(): ConfiguredInstance[] {
  return allInstances().filter((i): i is ConfiguredInstance => i instanceof ConfiguredInstance);
}
