import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { DBOS, WorkflowQueue } from '../src';
import { requireEngine } from '../src/dbos';
import { Agent, eventually, freshAgent, whenSignalled } from './harness';

let agent: Agent;

interface Tick {
  workflowID: string;
  scheduled: unknown;
  second: unknown;
}
const ticks: Tick[] = [];
const ticked = new EventEmitter();
ticked.setMaxListeners(100);

function recordTick(scheduled: unknown, second: unknown): void {
  ticks.push({ workflowID: DBOS.workflowID!, scheduled, second });
  ticked.emit('tick');
}

const everySecond = DBOS.registerWorkflow(
  async (scheduled: Date, context: unknown) => {
    recordTick(scheduled, context);
  },
  { name: 'everySecond' },
);

const daily = DBOS.registerWorkflow(
  async (scheduled: Date, context: unknown) => {
    recordTick(scheduled, context);
  },
  { name: 'daily' },
);

class Ticker {
  @DBOS.scheduled({ crontab: '* * * * * *', queueName: 'ticks' })
  @DBOS.workflow()
  static async tick(scheduled: Date, startedAt: Date): Promise<void> {
    recordTick(scheduled, startedAt);
  }
}
void Ticker;

new WorkflowQueue('ticks');

/** A workflow no schedule of this process names: its ticks come from schedules made elsewhere. */
DBOS.registerWorkflow(
  async (scheduled: Date, context: unknown) => {
    recordTick(scheduled, context);
  },
  { name: 'unseenTick' },
);

/** The first tick of a workflow id prefix that satisfies probe (waits for it: the workflow signals). */
function nextTick(prefix: string, probe: (t: Tick) => boolean = () => true, timeoutMs = 30_000): Promise<Tick> {
  return whenSignalled(ticked, 'tick', () => ticks.find((t) => t.workflowID.startsWith(prefix) && probe(t)), `a tick of ${prefix}`, timeoutMs);
}

before(async () => {
  agent = await freshAgent('schedules');
  DBOS.setConfig(agent.config('schedules-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

test('a schedule fires: its workflow gets the tick time as a Date and the context', async () => {
  await DBOS.createSchedule({ scheduleName: 'each-second', workflowFn: everySecond, schedule: '* * * * * *', context: { region: 'eu' } });
  const tick = await nextTick('sched-each-second-');
  // The first tick's workflow finishes.
  await DBOS.retrieveWorkflow(tick.workflowID).getResult();
  assert.ok(tick.scheduled instanceof Date, `scheduled time ${String(tick.scheduled)}`);
  assert.deepEqual(tick.second, { region: 'eu' });
  // The id carries the same tick time.
  const tickText = tick.workflowID.slice('sched-each-second-'.length);
  assert.equal(new Date(tickText).getTime(), (tick.scheduled as Date).getTime());
  const status = await DBOS.getWorkflowStatus(tick.workflowID);
  assert.equal(status?.status, 'SUCCESS');
  assert.equal(status?.workflowName, 'everySecond');

  const s = await DBOS.getSchedule('each-second');
  assert.equal(s?.workflowName, 'everySecond');
  assert.equal(s?.schedule, '* * * * * *');
  assert.equal(s?.status, 'ACTIVE');
  assert.deepEqual(s?.context, { region: 'eu' });
  assert.ok(s?.lastFiredAt, 'last_fired_at moved');
});

test('pause stops the ticks, resume starts them again', async () => {
  await DBOS.pauseSchedule('each-second');
  const pausedAt = Date.now();
  assert.equal((await DBOS.getSchedule('each-second'))?.status, 'PAUSED');
  // Let two seconds pass on the agent's clock: a workflow delayed 2 s is released by its sweep.
  const marker = await DBOS.startWorkflow(daily, { queueName: 'ticks', enqueueOptions: { delaySeconds: 2 } })(new Date(0), 'marker');
  await marker.getResult();
  const late = ticks.filter((t) => t.workflowID.startsWith('sched-each-second-') && (t.scheduled as Date).getTime() > pausedAt + 1000);
  assert.deepEqual(late, [], 'no tick while paused');

  await DBOS.resumeSchedule('each-second');
  const resumedAt = Date.now();
  assert.equal((await DBOS.getSchedule('each-second'))?.status, 'ACTIVE');
  const tick = await nextTick('sched-each-second-', (t) => (t.scheduled as Date).getTime() >= resumedAt - 1000);
  assert.ok(tick.scheduled instanceof Date);
  await DBOS.deleteSchedule('each-second');
  assert.equal(await DBOS.getSchedule('each-second'), null);
});

test('trigger runs the workflow now, whatever its status', async () => {
  await DBOS.createSchedule({ scheduleName: 'nightly', workflowFn: daily, schedule: '0 0 * * *', context: 'ctx-text' });
  await DBOS.pauseSchedule('nightly');
  const before = Date.now();
  const h = await DBOS.triggerSchedule('nightly');
  assert.match(h.workflowID, /^sched-nightly-trigger-/);
  await h.getResult();
  const tick = await nextTick(h.workflowID);
  assert.ok(tick.scheduled instanceof Date);
  assert.ok((tick.scheduled as Date).getTime() >= before - 1000);
  assert.equal(tick.second, 'ctx-text');
  await assert.rejects(DBOS.triggerSchedule('no-such-schedule'), /Schedule "no-such-schedule" not found/);
});

test('backfill enqueues each tick in the range once', async () => {
  const end = new Date();
  const start = new Date(end.getTime() - 3 * 24 * 3600 * 1000);
  const handles = await DBOS.backfillSchedule('nightly', start, end);
  assert.equal(handles.length, 3);
  await Promise.all(handles.map((h) => h.getResult()));
  for (const h of handles) {
    assert.match(h.workflowID, /^sched-nightly-\d{4}-\d{2}-\d{2}T00:00:00\+00:00$/);
    const tick = await nextTick(h.workflowID);
    assert.ok(tick.scheduled instanceof Date);
    assert.equal((tick.scheduled as Date).getUTCHours(), 0);
  }
  const again = await DBOS.backfillSchedule('nightly', start, end);
  assert.deepEqual(
    again.map((h) => h.workflowID),
    handles.map((h) => h.workflowID),
  );
  assert.equal(ticks.filter((t) => t.workflowID === handles[0].workflowID).length, 1, 'a tick runs once');
});

test('list, update and apply schedules', async () => {
  await DBOS.updateSchedule('nightly', { schedule: '0 6 * * *', cronTimezone: 'America/New_York', context: { v: 2 } });
  const updated = (await DBOS.getSchedule('nightly'))!;
  assert.equal(updated.schedule, '0 6 * * *');
  assert.equal(updated.cronTimezone, 'America/New_York');
  assert.deepEqual(updated.context, { v: 2 });
  assert.equal(updated.status, 'PAUSED', 'an update keeps the status');
  await assert.rejects(DBOS.updateSchedule('nightly', { cronTimezone: 'Mars/Olympus' }), /Invalid timezone: 'Mars\/Olympus'/);

  await DBOS.applySchedules([
    { scheduleName: 'applied-a', workflowFn: daily, schedule: '0 1 * * *' },
    { scheduleName: 'applied-b', workflowFn: daily, schedule: '0 2 * * *', queueName: 'ticks' },
  ]);
  const a = (await DBOS.getSchedule('applied-a'))!;
  await DBOS.applySchedules([
    { scheduleName: 'applied-a', workflowFn: daily, schedule: '0 1 * * *' },
    { scheduleName: 'applied-b', workflowFn: daily, schedule: '0 3 * * *', queueName: 'ticks' },
  ]);
  assert.equal((await DBOS.getSchedule('applied-a'))!.scheduleId, a.scheduleId);
  const b = (await DBOS.getSchedule('applied-b'))!;
  assert.equal(b.schedule, '0 3 * * *');
  assert.equal(b.queueName, 'ticks');

  const names = (await DBOS.listSchedules({ scheduleNamePrefix: 'applied-' })).map((s) => s.scheduleName);
  assert.deepEqual(names, ['applied-a', 'applied-b']);
  const byWorkflow = (await DBOS.listSchedules({ workflowName: 'daily', status: 'PAUSED' })).map((s) => s.scheduleName);
  assert.deepEqual(byWorkflow, ['nightly']);
  await assert.rejects(
    DBOS.createSchedule({ scheduleName: 'bad', workflowFn: daily, schedule: '0 0 * * *', options: { cronTimezone: 'Nowhere/Land' } }),
    /Invalid timezone/,
  );
});

test("4.x's @DBOS.scheduled: a schedule made at launch, called with (scheduled time, start time)", async () => {
  const s = await DBOS.getSchedule('Ticker.tick');
  assert.equal(s?.workflowName, 'tick');
  assert.equal(s?.workflowClassName, 'Ticker');
  assert.equal(s?.queueName, 'ticks');
  const tick = await nextTick('sched-Ticker.tick-');
  assert.ok(tick.scheduled instanceof Date);
  assert.ok(tick.second instanceof Date);
  assert.ok((tick.second as Date).getTime() >= (tick.scheduled as Date).getTime());
  await DBOS.deleteSchedule('Ticker.tick');
});

test('a tick of a schedule this process did not make gets its time as a Date too', async () => {
  // Made after launch by another connection (a client, another process), as its raw request.
  await requireEngine().request('create_schedule', {
    schedule_name: 'made-elsewhere', workflow_name: 'unseenTick', schedule: '* * * * * *', context: '{"from":"elsewhere"}',
  });
  const fired = await nextTick('sched-made-elsewhere-');
  assert.ok(fired.scheduled instanceof Date, `scheduled time ${String(fired.scheduled)}`);
  assert.deepEqual(fired.second, { from: 'elsewhere' });
  const triggered = (await requireEngine().request('trigger_schedule', { schedule_name: 'made-elsewhere' })).workflow_id as string;
  const tick = await nextTick(triggered);
  assert.ok(tick.scheduled instanceof Date, `triggered time ${String(tick.scheduled)}`);
  await DBOS.deleteSchedule('made-elsewhere');
});

test("updateSchedule keeps the schedule's last_fired_at, as DBOS's update does", async () => {
  await DBOS.createSchedule({ scheduleName: 'keeps-its-tick', workflowFn: everySecond, schedule: '* * * * * *' });
  await nextTick('sched-keeps-its-tick-');
  await DBOS.pauseSchedule('keeps-its-tick');
  const fired = await eventually(async () => (await DBOS.getSchedule('keeps-its-tick'))?.lastFiredAt ?? undefined);
  await DBOS.updateSchedule('keeps-its-tick', { context: { v: 3 } });
  const updated = (await DBOS.getSchedule('keeps-its-tick'))!;
  assert.deepEqual(updated.context, { v: 3 });
  assert.equal(updated.status, 'PAUSED');
  assert.ok(updated.lastFiredAt, 'last_fired_at kept');
  assert.ok(new Date(updated.lastFiredAt).getTime() >= new Date(fired).getTime());
  await assert.rejects(DBOS.updateSchedule('no-such-schedule', { context: 1 }), /Schedule 'no-such-schedule' not found/);
  await DBOS.deleteSchedule('keeps-its-tick');
});
