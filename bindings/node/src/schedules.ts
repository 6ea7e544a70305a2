/**
 * Workflow schedules: DBOS TypeScript 5.x's dynamic schedules, rows of the
 * shared `workflow_schedules` table that the agent fires (PROTOCOL.md
 * section 2.12), and 4.x's `@DBOS.scheduled` decorator, which 5.x dropped:
 * here it declares a schedule that is created (or brought up to date) at
 * launch.
 *
 * A tick reaches its workflow as `portable_json` inputs, the scheduled time
 * as ISO 8601 text; a workflow used in a schedule is given an input adapter
 * so that it is called with `(scheduledDate: Date, context)` as in DBOS.
 */
import { requireEngine } from './dbos';
import { DBOSError } from './error';
import { AnyCtor, FunctionRegistration, classNameOf, findWorkflow, registrationOf, allWorkflows } from './registry';
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

async function contextText(context: unknown): Promise<string | undefined> {
  const text = await requireEngine().serializer.stringify(context);
  return text === undefined || text === null ? undefined : String(text);
}

async function contextValue(text: string | undefined): Promise<unknown> {
  if (text === undefined) return null;
  try {
    return await requireEngine().serializer.parse(text);
  } catch {
    // Another SDK's context: plain JSON, or text of its own.
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
}

async function toSchedule(w: ScheduleWire): Promise<WorkflowSchedule> {
  return {
    scheduleId: w.schedule_id ?? '',
    scheduleName: w.schedule_name,
    workflowName: w.workflow_name,
    workflowClassName: w.workflow_class_name ?? '',
    schedule: w.schedule,
    status: w.status ?? 'ACTIVE',
    context: await contextValue(w.context),
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

async function findSchedule(name: string): Promise<ScheduleWire | undefined> {
  const reply = await requireEngine().request('list_schedules', { schedule_name_prefix: name, all_applications: true });
  return (reply.schedules as ScheduleWire[]).find((s) => s.schedule_name === name);
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

async function wireOf(d: ScheduleDefinition, reg: FunctionRegistration): Promise<ScheduleWire> {
  if (d.cronTimezone) validateTimezone(d.cronTimezone);
  const w: ScheduleWire = {
    schedule_name: d.scheduleName,
    workflow_name: reg.name,
    schedule: d.schedule,
    status: 'ACTIVE',
    automatic_backfill: d.automaticBackfill ?? false,
  };
  if (reg.className) w.workflow_class_name = reg.className;
  const ctx = await contextText(d.context);
  if (ctx !== undefined) w.context = ctx;
  if (d.cronTimezone) w.cron_timezone = d.cronTimezone;
  if (d.queueName) w.queue_name = d.queueName;
  return w;
}

/** The fields that define what a schedule runs (not its status or bookkeeping). */
function sameDefinition(a: ScheduleWire, b: ScheduleWire): boolean {
  const key = (w: ScheduleWire) =>
    JSON.stringify([w.workflow_name, w.workflow_class_name ?? '', w.schedule, w.context ?? null, w.cron_timezone ?? null, w.queue_name ?? null, w.automatic_backfill ?? false]);
  return key(a) === key(b);
}

/** Replaces a schedule's definition, keeping its id and status (the agent has no update op). */
async function replaceSchedule(stored: ScheduleWire, next: ScheduleWire): Promise<void> {
  const e = requireEngine();
  await e.request('delete_schedule', { schedule_name: stored.schedule_name });
  const body: ScheduleWire = { ...next, status: stored.status ?? 'ACTIVE' };
  if (stored.schedule_id) body.schedule_id = stored.schedule_id;
  await e.request('create_schedule', body as unknown as Record<string, unknown>);
}

export async function createSchedule(options: {
  scheduleName: string;
  workflowFn: ScheduledWorkflowFn;
  schedule: string;
  context?: unknown;
  options?: ScheduleOptions;
}): Promise<void> {
  const e = requireEngine('createSchedule');
  const reg = scheduledRegistration(options.workflowFn);
  const w = await wireOf({ ...options, ...options.options }, reg);
  adaptScheduled(reg);
  await durably('DBOS.createSchedule', async () => {
    await e.request('create_schedule', w as unknown as Record<string, unknown>);
  });
}

export async function listSchedules(filters?: {
  applicationName?: string | string[];
  status?: string | string[];
  workflowName?: string | string[];
  scheduleNamePrefix?: string | string[];
}): Promise<WorkflowSchedule[]> {
  const e = requireEngine('listSchedules');
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
  const wires = await durably('DBOS.listSchedules', async () => (await e.request('list_schedules', body)).schedules as ScheduleWire[]);
  const kept = prefixes && prefixes.length > 1 ? wires.filter((w) => prefixes.some((p) => w.schedule_name.startsWith(p))) : wires;
  return Promise.all(kept.map(toSchedule));
}

export async function getSchedule(name: string): Promise<WorkflowSchedule | null> {
  requireEngine('getSchedule');
  const w = await durably('DBOS.getSchedule', async () => (await findSchedule(name)) ?? null);
  return w ? toSchedule(w) : null;
}

async function onSchedule(op: string, stepName: string, name: string): Promise<void> {
  const e = requireEngine(stepName.slice('DBOS.'.length));
  await durably(stepName, async () => {
    // DBOS changes no row for a name it does not know; the agent refuses it.
    if (!(await findSchedule(name))) return;
    await e.request(op, { schedule_name: name });
  });
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

export async function updateSchedule(
  name: string,
  updates: { schedule?: string; context?: unknown; automaticBackfill?: boolean; cronTimezone?: string | null; queueName?: string | null },
): Promise<void> {
  requireEngine('updateSchedule');
  if (updates.cronTimezone) validateTimezone(updates.cronTimezone);
  await durably('DBOS.updateSchedule', async () => {
    const stored = await findSchedule(name);
    if (!stored) return;
    const next: ScheduleWire = { ...stored };
    delete next.last_fired_at;
    if (updates.schedule !== undefined) next.schedule = updates.schedule;
    if ('context' in updates) {
      const ctx = await contextText(updates.context);
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
    // The owner is the caller's application: a client-only field on create.
    delete next.application_name;
    await replaceSchedule(stored, next);
  });
}

/** Creates the schedules that are missing and brings the others' definitions up to date. */
export async function applySchedules(schedules: ScheduleDefinition[]): Promise<void> {
  const e = requireEngine('applySchedules');
  if (e.currentRun()) throw new DBOSError('applySchedules cannot be called from within a workflow');
  const wires: ScheduleWire[] = [];
  for (const s of schedules) {
    const reg = scheduledRegistration(s.workflowFn);
    wires.push(await wireOf(s, reg));
    adaptScheduled(reg);
  }
  for (const w of wires) await applyOne(w);
}

async function applyOne(w: ScheduleWire): Promise<void> {
  const stored = await findSchedule(w.schedule_name);
  if (!stored) await requireEngine().request('create_schedule', w as unknown as Record<string, unknown>);
  else if (!sameDefinition(stored, w)) await replaceSchedule(stored, w);
}

async function scheduleNotFound(name: string, err: unknown): Promise<never> {
  if (!(await findSchedule(name))) throw new DBOSError(`Schedule "${name}" not found`);
  throw err;
}

export async function triggerSchedule(name: string): Promise<WorkflowHandle<unknown>> {
  const e = requireEngine('triggerSchedule');
  if (e.currentRun()) throw new DBOSError('triggerSchedule cannot be called from within a workflow');
  let reply: Record<string, unknown>;
  try {
    reply = await e.request('trigger_schedule', { schedule_name: name });
  } catch (err) {
    return scheduleNotFound(name, err);
  }
  return new AgentWorkflowHandle(() => requireEngine(), reply.workflow_id as string);
}

export async function backfillSchedule(name: string, start: Date, end: Date): Promise<WorkflowHandle<unknown>[]> {
  const e = requireEngine('backfillSchedule');
  if (e.currentRun()) throw new DBOSError('backfillSchedule cannot be called from within a workflow');
  let reply: Record<string, unknown>;
  try {
    reply = await e.request('backfill_schedule', { schedule_name: name, start_epoch_ms: start.getTime(), end_epoch_ms: end.getTime() });
  } catch (err) {
    return scheduleNotFound(name, err);
  }
  return (reply.workflow_ids as string[]).map((id) => new AgentWorkflowHandle(() => requireEngine(), id));
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
    await applyOne(w);
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
