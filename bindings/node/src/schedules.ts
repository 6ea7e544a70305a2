/**
 * Workflow schedules: DBOS TypeScript 5.x's dynamic schedules, rows of the
 * shared `workflow_schedules` table that the agent fires (PROTOCOL.md
 * section 2.12), and 4.x's `@DBOS.scheduled` decorator, which 5.x dropped:
 * here it declares a schedule that is created (or brought up to date) at
 * launch.
 *
 * A tick reaches its workflow as `portable_json` inputs, the scheduled time
 * as ISO 8601 text; a workflow used in a schedule is given an input adapter
 * so that it is called with `(scheduledDate: Date, context)` as in DBOS, and
 * a tick of a schedule this process has not seen (made by a client, or by
 * another process after launch) is decoded the same way when it runs
 * (tickArgs).
 *
 * Each operation is written once over a `Requester` (runtime.ts): DBOS.*
 * calls it with the worker's engine (inside the durable steps DBOS names),
 * DBOSClient with its connection.
 */
import { requireEngine } from './dbos';
import { DBOSError } from './error';
import { AnyCtor, FunctionRegistration, classNameOf, findWorkflow, registrationOf, allWorkflows } from './registry';
import type { Requester } from './runtime';
import type { DBOSSerializer } from './serialization';
import type { FunctionName, InputSchema, WorkflowHandle } from './types';
import { AgentWorkflowHandle } from './workflow';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ScheduledWorkflowFn = (scheduledDate: Date, context: any) => Promise<void>;

export interface ScheduleOptions {
  automaticBackfill?: boolean;
  cronTimezone?: string;
  queueName?: string;
}

export interface WorkflowSchedule {
  scheduleId: string;
  scheduleName: string;
  workflowName: string;
  workflowClassName: string;
  schedule: string;
  status: string;
  context: unknown;
  lastFiredAt: string | null;
  automaticBackfill: boolean;
  cronTimezone: string | null;
  queueName: string | null;
  applicationName?: string;
}

/** DBOS TypeScript 4.x's scheduler modes for `@DBOS.scheduled`. */
export enum SchedulerMode {
  /** Ticks missed while the application was down are run on its return (the schedule's automatic backfill). */
  ExactlyOncePerInterval = 'ExactlyOncePerInterval',
  /** Only the ticks while the application runs. */
  ExactlyOncePerIntervalWhenActive = 'ExactlyOncePerIntervalWhenActive',
}

/** DBOS TypeScript 4.x's `@DBOS.scheduled` configuration. */
export interface SchedulerConfig {
  crontab: string;
  mode?: SchedulerMode;
  queueName?: string;
}

/** 4.x's scheduled workflow arguments: the scheduled time, and the time it started. */
export type ScheduledArgs = [Date, Date];

/** A `Schedule` of the protocol (section 7). */
interface ScheduleWire {
  schedule_name: string;
  workflow_name: string;
  workflow_class_name?: string;
  schedule: string;
  context?: string;
  status?: string;
  automatic_backfill?: boolean;
  cron_timezone?: string;
  queue_name?: string;
  last_fired_at?: string;
  application_name?: string;
  schedule_id?: string;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A tick's arguments as DBOS passes them: the scheduled time as a Date (an
 * agent's or DBOS Python's tick carries ISO 8601 text; DBOS TypeScript's a
 * Date already) and the context read back with the application's serializer
 * when DBOS TypeScript's serializer wrote it.
 */
export function scheduledArgs(input: unknown, legacy: boolean): unknown[] {
  const args = Array.isArray(input)
    ? [...input]
    : input !== null && typeof input === 'object' && Array.isArray((input as { positionalArgs?: unknown }).positionalArgs)
      ? [...(input as { positionalArgs: unknown[] }).positionalArgs]
      : [input];
  if (typeof args[0] === 'string' && ISO_TIME.test(args[0])) args[0] = new Date(args[0]);
  if (legacy) {
    // 4.x's second argument is when the run began, not a context.
    if (!(args[1] instanceof Date)) args[1] = new Date();
  } else if (args[1] !== null && typeof args[1] === 'object') {
    args[1] = unwrapContext(args[1]);
  }
  return args;
}

/** A context DBOS TypeScript stored (its serializer's JSON text, which a tick hands over parsed). */
function unwrapContext(value: unknown): unknown {
  const marked = value as Record<string, unknown>;
  if (marked.__dbos_serializer === undefined) return value;
  try {
    return requireEngine().serializer.parse(JSON.stringify(value));
  } catch {
    return value;
  }
}

const adapted = new WeakSet<FunctionRegistration>();

/**
 * A run's arguments, decoded as a tick's when the run is one (its id is a
 * schedule's, `sched-<name>-...`, its inputs portable JSON of the scheduled
 * time as ISO 8601 text and the context) and its workflow was not adapted
 * (its input schema decodes those already). So a schedule made by a client,
 * or by another process after launch, calls its workflow with a Date too.
 */
export function tickArgs(reg: FunctionRegistration, workflowID: string, serialization: string | undefined, args: unknown[]): unknown[] {
  if (adapted.has(reg) || !workflowID.startsWith('sched-') || serialization !== 'portable_json') return args;
  if (args.length !== 2 || typeof args[0] !== 'string' || !ISO_TIME.test(args[0])) return args;
  return scheduledArgs(args, false);
}

/** Makes reg's runs take a tick's arguments as DBOS passes them (before the application's own input schema). */
export function adaptScheduled(reg: FunctionRegistration, legacy = false): void {
  if (adapted.has(reg)) return;
  adapted.add(reg);
  const cfg = reg.workflowConfig ?? {};
  const own: InputSchema | undefined = cfg.inputSchema;
  reg.workflowConfig = {
    ...cfg,
    inputSchema: {
      parse(input: unknown) {
        const args = scheduledArgs(input, legacy);
        return own ? own.parse(args) : args;
      },
    },
  };
}

function scheduledRegistration(fn: ScheduledWorkflowFn): FunctionRegistration {
  const reg = registrationOf(fn);
  if (reg?.isInstance) {
    throw new DBOSError(`Cannot schedule instance method "${reg.name}". Only static methods and free functions can be used in schedules.`);
  }
  if (!reg?.workflowConfig) throw new DBOSError(`${fn.name} is not a registered DBOS workflow function`);
  return reg;
}

export function validateTimezone(timezone: string): void {
  try {
    Intl.DateTimeFormat(undefined, { timeZone: timezone });
  } catch {
    throw new Error(`Invalid timezone: '${timezone}'`);
  }
}

async function contextText(serializer: DBOSSerializer, context: unknown): Promise<string | undefined> {
  const text = await serializer.stringify(context);
  return text === undefined || text === null ? undefined : String(text);
}

async function contextValue(serializer: DBOSSerializer, text: string | undefined): Promise<unknown> {
  if (text === undefined) return null;
  try {
    return await serializer.parse(text);
  } catch {
    // Another SDK's context: plain JSON, or text of its own.
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
}

async function toSchedule(w: ScheduleWire, serializer: DBOSSerializer): Promise<WorkflowSchedule> {
  return {
    scheduleId: w.schedule_id ?? '',
    scheduleName: w.schedule_name,
    workflowName: w.workflow_name,
    workflowClassName: w.workflow_class_name ?? '',
    schedule: w.schedule,
    status: w.status ?? 'ACTIVE',
    context: await contextValue(serializer, w.context),
    lastFiredAt: w.last_fired_at ?? null,
    automaticBackfill: w.automatic_backfill ?? false,
    cronTimezone: w.cron_timezone ?? null,
    queueName: w.queue_name ?? null,
    applicationName: w.application_name,
  };
}

/** An admin call: from workflow code a step under DBOS's name, as DBOS checkpoints it. */
function durably<R>(name: string, fn: () => Promise<R>): Promise<R> {
  const e = requireEngine();
  return e.currentRun() ? e.runStep(fn, name, {}) : fn();
}

async function findSchedule(req: Requester, name: string): Promise<ScheduleWire | undefined> {
  const reply = await req.request('list_schedules', { schedule_name_prefix: name, all_applications: true });
  return (reply.schedules as ScheduleWire[]).find((s) => s.schedule_name === name);
}

/** A schedule's definition, its workflow named (DBOSClient's form; DBOS.*'s names it by its function). */
export interface NamedScheduleDefinition {
  scheduleName: string;
  workflowName: string;
  workflowClassName?: string;
  schedule: string;
  context?: unknown;
  automaticBackfill?: boolean;
  cronTimezone?: string;
  queueName?: string;
  /** DBOSClient's: the application that owns the schedule, default the client's. */
  applicationName?: string;
}

interface ScheduleDefinition {
  scheduleName: string;
  workflowFn: ScheduledWorkflowFn;
  schedule: string;
  context?: unknown;
  automaticBackfill?: boolean;
  cronTimezone?: string;
  queueName?: string;
}

function named(d: ScheduleDefinition, reg: FunctionRegistration): NamedScheduleDefinition {
  const { workflowFn: _fn, ...rest } = d;
  return { ...rest, workflowName: reg.name, workflowClassName: reg.className };
}

async function wireOf(serializer: DBOSSerializer, d: NamedScheduleDefinition): Promise<ScheduleWire> {
  if (d.cronTimezone) validateTimezone(d.cronTimezone);
  const w: ScheduleWire = {
    schedule_name: d.scheduleName,
    workflow_name: d.workflowName,
    schedule: d.schedule,
    status: 'ACTIVE',
    automatic_backfill: d.automaticBackfill ?? false,
  };
  if (d.workflowClassName) w.workflow_class_name = d.workflowClassName;
  const ctx = await contextText(serializer, d.context);
  if (ctx !== undefined) w.context = ctx;
  if (d.cronTimezone) w.cron_timezone = d.cronTimezone;
  if (d.queueName) w.queue_name = d.queueName;
  if (d.applicationName) w.application_name = d.applicationName;
  return w;
}

/** The fields that define what a schedule runs (not its status or bookkeeping). */
function sameDefinition(a: ScheduleWire, b: ScheduleWire): boolean {
  const key = (w: ScheduleWire) =>
    JSON.stringify([w.workflow_name, w.workflow_class_name ?? '', w.schedule, w.context ?? null, w.cron_timezone ?? null, w.queue_name ?? null, w.automatic_backfill ?? false]);
  return key(a) === key(b);
}

/**
 * Replaces a schedule's definition, keeping its runtime state as DBOS's
 * update keeps it: its id, its status and its last_fired_at (the agent has
 * no update op; create_schedule takes the kept last_fired_at).
 */
async function replaceSchedule(req: Requester, stored: ScheduleWire, next: ScheduleWire): Promise<void> {
  await req.request('delete_schedule', { schedule_name: stored.schedule_name });
  const body: ScheduleWire = { ...next, status: stored.status ?? 'ACTIVE' };
  if (stored.schedule_id) body.schedule_id = stored.schedule_id;
  if (stored.last_fired_at) body.last_fired_at = stored.last_fired_at;
  else delete body.last_fired_at;
  // The owner stays the stored one: named by a client when it is another
  // application than its own (a worker may name only its own, the default).
  // An unclaimed row is claimed by the writer, as DBOS's apply claims it.
  if (req.role === 'client' && stored.application_name && stored.application_name !== req.appName) {
    body.application_name = stored.application_name;
  } else {
    delete body.application_name;
  }
  await req.request('create_schedule', body as unknown as Record<string, unknown>);
}

// ---- the operations, over a requester (DBOS.* and DBOSClient) ----------------

export async function createScheduleWith(req: Requester, d: NamedScheduleDefinition): Promise<void> {
  const w = await wireOf(req.serializer, d);
  await req.request('create_schedule', w as unknown as Record<string, unknown>);
}

export interface ScheduleFilters {
  applicationName?: string | string[];
  status?: string | string[];
  workflowName?: string | string[];
  scheduleNamePrefix?: string | string[];
}

export async function listSchedulesWith(req: Requester, filters?: ScheduleFilters): Promise<WorkflowSchedule[]> {
  const body: Record<string, unknown> = {};
  if (filters?.status !== undefined) body.status = [filters.status].flat();
  if (filters?.workflowName !== undefined) body.workflow_name = [filters.workflowName].flat();
  if (filters?.applicationName !== undefined) {
    const apps = [filters.applicationName].flat();
    if (apps.length === 0) body.all_applications = true;
    else body.application_name = apps;
  }
  const prefixes = filters?.scheduleNamePrefix === undefined ? undefined : [filters.scheduleNamePrefix].flat();
  if (prefixes?.length === 1) body.schedule_name_prefix = prefixes[0];
  const wires = (await req.request('list_schedules', body)).schedules as ScheduleWire[];
  const kept = prefixes && prefixes.length > 1 ? wires.filter((w) => prefixes.some((p) => w.schedule_name.startsWith(p))) : wires;
  return Promise.all(kept.map((w) => toSchedule(w, req.serializer)));
}

export async function getScheduleWith(req: Requester, name: string): Promise<WorkflowSchedule | null> {
  const w = await findSchedule(req, name);
  return w ? toSchedule(w, req.serializer) : null;
}

/** Pauses, resumes or deletes a schedule; as in DBOS, a name it does not know changes nothing (the agent refuses it). */
export async function onScheduleWith(req: Requester, op: 'delete_schedule' | 'pause_schedule' | 'resume_schedule', name: string): Promise<void> {
  if (!(await findSchedule(req, name))) return;
  await req.request(op, { schedule_name: name });
}

export interface ScheduleUpdates {
  schedule?: string;
  context?: unknown;
  automaticBackfill?: boolean;
  cronTimezone?: string | null;
  queueName?: string | null;
}

/**
 * Changes the given fields of a schedule's definition (`null` clears a
 * nullable one; `context` present, even undefined, sets it). Its id, status
 * and last_fired_at are kept. Whether a missing schedule is an error is the
 * caller's: false when there was none.
 */
export async function updateScheduleWith(req: Requester, name: string, updates: ScheduleUpdates): Promise<boolean> {
  if (updates.cronTimezone) validateTimezone(updates.cronTimezone);
  const stored = await findSchedule(req, name);
  if (!stored) return false;
  const next: ScheduleWire = { ...stored };
  if (updates.schedule !== undefined) next.schedule = updates.schedule;
  if ('context' in updates) {
    const ctx = await contextText(req.serializer, updates.context);
    if (ctx === undefined) delete next.context;
    else next.context = ctx;
  }
  if (updates.automaticBackfill !== undefined) next.automatic_backfill = updates.automaticBackfill;
  if (updates.cronTimezone !== undefined) {
    if (updates.cronTimezone === null) delete next.cron_timezone;
    else next.cron_timezone = updates.cronTimezone;
  }
  if (updates.queueName !== undefined) {
    if (updates.queueName === null) delete next.queue_name;
    else next.queue_name = updates.queueName;
  }
  await replaceSchedule(req, stored, next);
  return true;
}

/** Creates the schedules that are missing and brings the others' definitions up to date (keeping their state). */
export async function applySchedulesWith(req: Requester, defs: NamedScheduleDefinition[]): Promise<void> {
  const wires: ScheduleWire[] = [];
  for (const d of defs) wires.push(await wireOf(req.serializer, d));
  for (const w of wires) await applyOne(req, w);
}

async function applyOne(req: Requester, w: ScheduleWire): Promise<void> {
  const stored = await findSchedule(req, w.schedule_name);
  if (!stored) await req.request('create_schedule', w as unknown as Record<string, unknown>);
  else if (!sameDefinition(stored, w)) await replaceSchedule(req, stored, w);
}

async function scheduleNotFound(req: Requester, name: string, err: unknown): Promise<never> {
  if (!(await findSchedule(req, name))) throw new DBOSError(`Schedule "${name}" not found`);
  throw err;
}

/** Enqueues one run of the schedule now; gives its workflow id. */
export async function triggerScheduleWith(req: Requester, name: string): Promise<string> {
  try {
    return (await req.request('trigger_schedule', { schedule_name: name })).workflow_id as string;
  } catch (err) {
    return scheduleNotFound(req, name, err);
  }
}

/** Enqueues the ticks in (start, end) not enqueued yet; gives every tick's workflow id. */
export async function backfillScheduleWith(req: Requester, name: string, start: Date, end: Date): Promise<string[]> {
  try {
    const reply = await req.request('backfill_schedule', { schedule_name: name, start_epoch_ms: start.getTime(), end_epoch_ms: end.getTime() });
    return reply.workflow_ids as string[];
  } catch (err) {
    return scheduleNotFound(req, name, err);
  }
}

// ---- DBOS.* (from dbos.ts): durable steps of workflow code, functions adapted ----

export async function createSchedule(options: {
  scheduleName: string;
  workflowFn: ScheduledWorkflowFn;
  schedule: string;
  context?: unknown;
  options?: ScheduleOptions;
}): Promise<void> {
  const e = requireEngine('createSchedule');
  const reg = scheduledRegistration(options.workflowFn);
  const { options: opts, ...def } = options;
  const d = named({ ...def, ...opts }, reg);
  // Checked before the step, as DBOS checks it (the step checks again).
  if (d.cronTimezone) validateTimezone(d.cronTimezone);
  adaptScheduled(reg);
  await durably('DBOS.createSchedule', () => createScheduleWith(e, d));
}

export async function listSchedules(filters?: ScheduleFilters): Promise<WorkflowSchedule[]> {
  const e = requireEngine('listSchedules');
  return durably('DBOS.listSchedules', () => listSchedulesWith(e, filters));
}

export async function getSchedule(name: string): Promise<WorkflowSchedule | null> {
  const e = requireEngine('getSchedule');
  return durably('DBOS.getSchedule', () => getScheduleWith(e, name));
}

async function onSchedule(op: 'delete_schedule' | 'pause_schedule' | 'resume_schedule', stepName: string, name: string): Promise<void> {
  const e = requireEngine(stepName.slice('DBOS.'.length));
  await durably(stepName, () => onScheduleWith(e, op, name));
}

export function deleteSchedule(name: string): Promise<void> {
  return onSchedule('delete_schedule', 'DBOS.deleteSchedule', name);
}

export function pauseSchedule(name: string): Promise<void> {
  return onSchedule('pause_schedule', 'DBOS.pauseSchedule', name);
}

export function resumeSchedule(name: string): Promise<void> {
  return onSchedule('resume_schedule', 'DBOS.resumeSchedule', name);
}

export async function updateSchedule(name: string, updates: ScheduleUpdates): Promise<void> {
  const e = requireEngine('updateSchedule');
  if (updates.cronTimezone) validateTimezone(updates.cronTimezone);
  await durably('DBOS.updateSchedule', async () => {
    if (!(await updateScheduleWith(e, name, updates))) throw new DBOSError(`Schedule '${name}' not found`);
  });
}

/** Creates the schedules that are missing and brings the others' definitions up to date. */
export async function applySchedules(schedules: ScheduleDefinition[]): Promise<void> {
  const e = requireEngine('applySchedules');
  if (e.currentRun()) throw new DBOSError('applySchedules cannot be called from within a workflow');
  const defs: NamedScheduleDefinition[] = [];
  const regs: FunctionRegistration[] = [];
  for (const s of schedules) {
    const reg = scheduledRegistration(s.workflowFn);
    defs.push(named(s, reg));
    regs.push(reg);
  }
  for (const reg of regs) adaptScheduled(reg);
  await applySchedulesWith(e, defs);
}

export async function triggerSchedule(name: string): Promise<WorkflowHandle<unknown>> {
  const e = requireEngine('triggerSchedule');
  if (e.currentRun()) throw new DBOSError('triggerSchedule cannot be called from within a workflow');
  const id = await triggerScheduleWith(e, name);
  return new AgentWorkflowHandle(() => requireEngine(), id);
}

export async function backfillSchedule(name: string, start: Date, end: Date): Promise<WorkflowHandle<unknown>[]> {
  const e = requireEngine('backfillSchedule');
  if (e.currentRun()) throw new DBOSError('backfillSchedule cannot be called from within a workflow');
  const ids = await backfillScheduleWith(e, name, start, end);
  return ids.map((id) => new AgentWorkflowHandle(() => requireEngine(), id));
}

// ---- 4.x's @DBOS.scheduled ------------------------------------------------------

interface LegacyScheduled {
  fn: unknown;
  ctor: AnyCtor | undefined;
  name: string;
  className?: string;
  config: SchedulerConfig;
}

const legacyScheduled: LegacyScheduled[] = [];

/** DBOS 4.x's registerScheduled: the workflow runs at every tick of the crontab, from launch on. */
export function registerScheduled(fn: unknown, config: SchedulerConfig & FunctionName): void {
  const target = config.ctorOrProto;
  const ctor = target === undefined ? undefined : ((typeof target === 'function' ? target : (target as object).constructor) as AnyCtor);
  const entry: LegacyScheduled = { fn, ctor, name: config.name ?? (fn as { name?: string }).name ?? '', className: config.className, config };
  legacyScheduled.push(entry);
  const reg = legacyRegistration(entry);
  if (reg) adaptScheduled(reg, true);
}

function legacyRegistration(s: LegacyScheduled): FunctionRegistration | undefined {
  const reg = registrationOf(s.fn);
  if (reg?.workflowConfig) return reg;
  const className = s.className ?? (s.ctor ? classNameOf(s.ctor) : '');
  return findWorkflow(className, s.name);
}

/** The schedule name of a 4.x scheduled workflow: its qualified name, as 4.x named its ticks. */
function legacyScheduleName(reg: FunctionRegistration): string {
  return reg.className ? `${reg.className}.${reg.name}` : reg.name;
}

/** At launch: the 4.x schedules are made to match their declarations; stored schedules' workflows are adapted. */
export async function launchSchedules(): Promise<void> {
  const e = requireEngine();
  for (const s of legacyScheduled) {
    const reg = legacyRegistration(s);
    if (!reg) {
      console.warn(`Scheduled workflow ${s.name} is not a registered workflow; skipping`);
      continue;
    }
    adaptScheduled(reg, true);
    const w: ScheduleWire = {
      schedule_name: legacyScheduleName(reg),
      workflow_name: reg.name,
      schedule: s.config.crontab,
      status: 'ACTIVE',
      automatic_backfill: s.config.mode === SchedulerMode.ExactlyOncePerInterval,
    };
    if (reg.className) w.workflow_class_name = reg.className;
    if (s.config.queueName) w.queue_name = s.config.queueName;
    await applyOne(e, w);
  }
  // Schedules made by an earlier run of the application fire here too.
  const stored = (await e.request('list_schedules', {})).schedules as ScheduleWire[];
  for (const w of stored) {
    const reg = findWorkflow(w.workflow_class_name ?? '', w.workflow_name) ?? allWorkflows().find((r) => r.name === w.workflow_name);
    if (reg) adaptScheduled(reg);
  }
}

export function clearScheduled(): void {
  legacyScheduled.length = 0;
}
