/**
 * `DBOS`: DBOS TypeScript 5.x's static API, served by the agent. The
 * semantics are the engine's (runtime.ts); this class holds the
 * application's configuration, the registration of its functions, and the
 * ambient-context blocks, and forwards the rest to the modules of each area
 * (comm, management, queues, schedules).
 */
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
  bindWrapper,
  classNameOf,
  clearRegistry,
  declareWorkflow,
  nameClass,
  registerInstance,
  registrationOf,
} from './registry';
import { Engine, HelloContributor } from './runtime';
import { registerSerializationRecipe, SerializationRecipe, serializeValue } from './serialization';
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
import type { StepStatus } from './context';
import { DLogger, makeLogger } from './logger';
import * as queues from './queues';
import * as schedules from './schedules';

export const DBOS_QUEUE_MIN_PRIORITY = 0;
export const DBOS_QUEUE_MAX_PRIORITY = 2 ** 31 - 1;

let config: DBOSConfig | undefined;
let engine: Engine | undefined;
let logger: DLogger = makeLogger(undefined);
/** Other modules' hello fields (queues), installed before launch. */
const contributors: HelloContributor[] = [];
const lifecycle: Array<{ initialize?: () => Promise<void> | void; destroy?: () => Promise<void> | void }> = [];

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

function handleFor<R>(workflowID: string): AgentWorkflowHandle<R> {
  return new AgentWorkflowHandle<R>(() => requireEngine(), workflowID);
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
  if (params.workflowAttributes !== undefined) validateAttributes(params.workflowAttributes);
  const started = await e.start(reg, target, args, params, reservedFunctionId);
  return handleFor<R>(started.workflowID);
}

function checkTarget(reg: FunctionRegistration, target: unknown): void {
  if (reg.isInstance && !(target instanceof ConfiguredInstance)) {
    throw new DBOSInvalidWorkflowTransitionError(
      'Attempt to call a `workflow` function on an object that is not a `ConfiguredInstance`',
    );
  }
}

function validateAttributes(attributes: unknown): void {
  if (attributes === null || typeof attributes !== 'object' || Array.isArray(attributes)) {
    throw new DBOSError('workflowAttributes must be a plain object');
  }
  JSON.stringify(attributes);
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

function validateStepConfig(config: StepConfig, name: string): void {
  const check = (value: number | undefined, what: string, ok: (v: number) => boolean, rule: string) => {
    if (value !== undefined && !ok(value)) throw new DBOSError(`Invalid ${what} for step ${name}: ${value} (${rule})`);
  };
  check(config.maxAttempts, 'maxAttempts', (v) => Number.isInteger(v) && v >= 1, 'must be an integer of at least 1');
  check(config.intervalSeconds, 'intervalSeconds', (v) => Number.isFinite(v) && v >= 0, 'must be a finite number of at least 0');
  check(config.backoffRate, 'backoffRate', (v) => Number.isFinite(v) && v > 0, 'must be a finite positive number');
  check(config.timeoutMS, 'timeoutMS', (v) => Number.isFinite(v) && v > 0, 'must be a finite positive number');
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

  static async launch(_options?: DBOSLaunchOptions): Promise<void> {
    if (engine) return;
    const c = config ?? {};
    const e = new Engine(c, [...contributors]);
    await e.launch();
    engine = e;
    for (const inst of allConfiguredInstances()) await inst.initialize();
    for (const l of lifecycle) await l.initialize?.();
  }

  static async shutdown(_options?: { deregister?: boolean; workflowCompletionTimeoutMS?: number }): Promise<void> {
    const e = engine;
    if (!e) return;
    for (const l of [...lifecycle].reverse()) await l.destroy?.();
    engine = undefined;
    await e.shutdown();
  }

  static registerLifecycleCallback(l: { initialize?: () => Promise<void> | void; destroy?: () => Promise<void> | void }): void {
    if (!lifecycle.includes(l)) lifecycle.push(l);
  }

  /** Forgets every registration (DBOS's test helper). */
  static clearRegistry(): void {
    clearRegistry();
  }

  static get logger(): DLogger {
    return logger;
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
    return currentContext()?.stepStatus;
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
    return false;
  }

  static isInStep(): boolean {
    const ctx = currentContext();
    return ctx?.run !== undefined && ctx.stepFunctionId !== undefined;
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
      validateStepConfig(cfg, name);
      const ctor = (isStatic ? target : target.constructor) as AnyCtor;
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
    validateStepConfig(cfg, name);
    return e.runStep(func, name, cfg);
  }

  static registerSerialization<T, S>(recipe: SerializationRecipe<T, S>): void {
    if (engine) throw new DBOSError('Serializers must be registered before DBOS.launch()');
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
      const functionId = run.takeFunctionId();
      if (timeoutMS !== undefined) run.takeFunctionId(); // the timer's id, as DBOS TypeScript takes it
      const recorded = e.replayed(run, functionId, 'DBOS.getResult');
      if (recorded) return (await e.revive(recorded)) as T | null;
      const result = await e.awaitResult(workflowID, timeoutMS);
      if (!result) {
        await e.record(run, { function_id: functionId, name: 'DBOS.getResult', output: await nullOutput(e), child_workflow_id: workflowID });
        return null;
      }
      await e.record(run, {
        function_id: functionId,
        name: 'DBOS.getResult',
        child_workflow_id: workflowID,
        output: result.status === 'SUCCESS' ? result.output : null,
        error: result.status === 'ERROR' ? result.error : null,
        serialization: result.serialization,
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

  // ---- workflow management and versions (management.ts) ----

  // ---- queues, schedules and debouncing (queues.ts, schedules.ts, debouncer.ts) ----

  static {
    // The queues module reads listenQueues and adds its hello fields; the
    // schedules module creates 4.x's declared schedules at launch.
    queues.installQueues({ config: () => config, addHelloContributor });
    DBOS.registerLifecycleCallback({ initialize: () => schedules.launchSchedules() });
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
