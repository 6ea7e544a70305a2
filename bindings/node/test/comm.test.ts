/**
 * Communication against the real agent: messages, events, streams, durable
 * sleep and patches, with their recorded steps, their replay after a
 * cancelled run is resumed, and a worker process killed while it waits in
 * DBOS.recv whose workflow another worker process finishes.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DBOS } from '../src';
import { requireEngine } from '../src/dbos';
import {
  DBOSError,
  DBOSInvalidWorkflowTransitionError,
  DBOSNonExistentWorkflowError,
  DBOSStreamTimeoutError,
  DBOSAwaitedWorkflowCancelledError,
} from '../src/error';
import { Agent, eventually, freshAgent } from './harness';
import { Proc } from './apps/proc';

let agent: Agent;

interface Step {
  function_id: number;
  name: string;
  output: string | null;
  error: string | null;
  serialization?: string;
  completed_at_epoch_ms?: number;
}

async function steps(workflowID: string): Promise<Step[]> {
  const reply = await requireEngine().request('list_steps', { workflow_id: workflowID });
  return reply.steps as Step[];
}

/**
 * A recorded DBOS.sleep's wake time in epoch ms, read as the agent reads one: the binding's
 * sleeps are recorded as DBOS TypeScript records them (integer epoch ms; test/wake_time.test.ts
 * checks that), DBOS Python's as epoch seconds (a float), so both are read.
 */
function wakeTimeMs(output: string | null): number {
  const v = JSON.parse(output ?? 'null') as number;
  return v < 1e11 ? Math.round(v * 1000) : v;
}

async function stepNames(workflowID: string): Promise<string[]> {
  return (await steps(workflowID)).map((s) => `${s.function_id}:${s.name}`);
}

/** Cancels a workflow, waits until its run here has stopped, and resumes it: the next run replays its history. */
async function cancelAndResume(workflowID: string): Promise<void> {
  const e = requireEngine();
  await e.request('cancel_workflow', { workflow_id: workflowID });
  await assert.rejects(DBOS.retrieveWorkflow(workflowID).getResult(), DBOSAwaitedWorkflowCancelledError);
  await e.request('resume_workflow', { workflow_id: workflowID });
}

// ---- workflows --------------------------------------------------------------

const receiver = DBOS.registerWorkflow(
  async () => {
    const onTopic: (string | null)[] = [];
    for (let i = 0; i < 3; i++) onTopic.push(await DBOS.recv<string>('t', 10));
    const onDefault = await DBOS.recv<string>(undefined, { timeoutSeconds: 10 });
    return { onTopic, onDefault };
  },
  { name: 'receiver' },
);

const sender = DBOS.registerWorkflow(
  async (destination: string) => {
    await DBOS.send(destination, 'default-1');
    for (const m of ['x1', 'x2', 'x3']) await DBOS.send(destination, m, 't');
  },
  { name: 'sender' },
);

const recvTwice = DBOS.registerWorkflow(
  async (topic: string, secondTimeout: number) => [await DBOS.recv<string>(topic, 10), await DBOS.recv<string>(topic, secondTimeout)],
  { name: 'recvTwice' },
);

const recvWithTimeout = DBOS.registerWorkflow(
  async (seconds: number) => {
    const started = Date.now();
    const got = await DBOS.recv<string>('nothing-comes', seconds);
    return { got, elapsed: Date.now() - started };
  },
  { name: 'recvWithTimeout' },
);

const recvDefault = DBOS.registerWorkflow(async () => DBOS.recv<string>(), { name: 'recvDefault' });

let bodyRuns = 0;
const recvReplayed = DBOS.registerWorkflow(
  async () => {
    bodyRuns++;
    const first = await DBOS.recv<string>('t', 30);
    await DBOS.setEvent('first', first);
    const gate = await DBOS.recv<string>('gate', 30);
    const second = await DBOS.recv<string>('t', 30);
    return [first, gate, second];
  },
  { name: 'recvReplayed' },
);

const sendToMissing = DBOS.registerWorkflow(
  async (destination: string) => {
    try {
      await DBOS.send(destination, 'lost');
      return 'sent';
    } catch (err) {
      return `${(err as Error).constructor.name}: ${(err as Error).message}`;
    }
  },
  { name: 'sendToMissing' },
);

const sendToMissingThenWait = DBOS.registerWorkflow(
  async () => {
    let failure = 'sent';
    try {
      await DBOS.send('missing-on-replay', 'lost');
    } catch (err) {
      failure = (err as Error).message;
    }
    await DBOS.setEvent('failed', failure);
    const gate = await DBOS.recv<string>('gate', 30);
    return `${failure}|${gate}`;
  },
  { name: 'sendToMissingThenWait' },
);

const replayedWriter = DBOS.registerWorkflow(
  async () => {
    await DBOS.writeStream('r', 'a');
    await DBOS.setEvent('wrote', true);
    const gate = await DBOS.recv<string>('gate', 30);
    await DBOS.writeStream('r', gate);
    await DBOS.closeStream('r');
  },
  { name: 'replayedWriter' },
);

const sendFromStep = DBOS.registerWorkflow(
  async (destination: string) => {
    await DBOS.runStep(async () => 'warm-up', { name: 'warmUp' });
    await DBOS.runStep(() => DBOS.send(destination, 'from-a-step', 's'), { name: 'sendingStep' });
  },
  { name: 'sendFromStep' },
);

const misuse = DBOS.registerWorkflow(
  async () => {
    const errors: string[] = [];
    const attempt = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await DBOS.runStep(fn, { name: what, retriesAllowed: false });
        errors.push(`${what}: no error`);
      } catch (err) {
        errors.push(`${what}: ${(err as Error).constructor.name}: ${(err as Error).message}`);
      }
    };
    await attempt('recvInStep', () => DBOS.recv('t', 1));
    await attempt('setEventInStep', () => DBOS.setEvent('k', 1));
    await attempt('getEventInStep', () => DBOS.getEvent('w', 'k', 1));
    await attempt('patchInStep', () => DBOS.patch('p'));
    return errors;
  },
  { name: 'misuse' },
);

const publisher = DBOS.registerWorkflow(
  async () => {
    await DBOS.setEvent('k', 'v1');
    await DBOS.setEvent('k', 'v2');
    await DBOS.setEvent('p', { portable: true }, { serializationType: 'portable' });
    await DBOS.setEvent('n', null);
  },
  { name: 'publisher' },
);

const eventReader = DBOS.registerWorkflow(
  async (workflowID: string, key: string, seconds: number) => DBOS.getEvent<unknown>(workflowID, key, seconds),
  { name: 'eventReader' },
);

const lateSetter = DBOS.registerWorkflow(
  async () => {
    const value = await DBOS.recv<string>('go', 30);
    await DBOS.setEvent('late', value);
  },
  { name: 'lateSetter' },
);

const streamWriter = DBOS.registerWorkflow(
  async (close: boolean) => {
    await DBOS.writeStream('s', 1);
    await DBOS.runStep(() => DBOS.writeStream('s', { two: 2 }), { name: 'writeFromStep' });
    await DBOS.writeStream('s', 'three');
    if (close) await DBOS.closeStream('s');
    return 'written';
  },
  { name: 'streamWriter' },
);

const pacedWriter = DBOS.registerWorkflow(
  async (count: number) => {
    for (let i = 0; i < count; i++) {
      const v = await DBOS.recv<string>('next', 30);
      await DBOS.writeStream('paced', v);
    }
    await DBOS.closeStream('paced');
  },
  { name: 'pacedWriter' },
);

const streamReader = DBOS.registerWorkflow(
  async (workflowID: string, offset: number) => {
    const seen: unknown[] = [];
    for await (const v of DBOS.readStream(workflowID, 's', { offset })) seen.push(v);
    const atOne = await DBOS.readStreamOffset(workflowID, 's', 1);
    return { seen, atOne };
  },
  { name: 'streamReader' },
);

const sleeper = DBOS.registerWorkflow(
  async (ms: number) => {
    const started = Date.now();
    await DBOS.sleep(ms);
    return Date.now() - started;
  },
  { name: 'sleeper' },
);

const sleepVariants = DBOS.registerWorkflow(
  async () => {
    await DBOS.sleepms(0); // takes an id, records nothing
    await DBOS.sleepSeconds(0.05);
    await DBOS.sleepms(20);
    return DBOS.runStep(async () => 'after', { name: 'afterSleeps' });
  },
  { name: 'sleepVariants' },
);

/** The code version the patched workflow runs, as a redeployment would change it. */
let patchCode: 'old' | 'patched' | 'deprecated' = 'old';
const oldStep = DBOS.registerStep(async () => 'old', { name: 'oldStep' });
const newStep = DBOS.registerStep(async () => 'new', { name: 'newStep' });
const patched = DBOS.registerWorkflow(
  async () => {
    let path: string;
    if (patchCode === 'old') {
      path = await oldStep();
    } else if (patchCode === 'patched') {
      path = (await DBOS.patch('v2')) ? await newStep() : await oldStep();
    } else {
      await DBOS.deprecatePatch('v2');
      path = await newStep();
    }
    const gate = await DBOS.recv<string>('gate', 30);
    return `${path}:${gate}`;
  },
  { name: 'patched' },
);

// ---- set-up -------------------------------------------------------------------

before(async () => {
  agent = await freshAgent('comm');
  DBOS.setConfig({ ...(agent.config('comm-app') as object), enablePatching: true });
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

// ---- messages -------------------------------------------------------------------

test('send and recv between workflows: topics, the default topic, the order sent', async () => {
  const r = await DBOS.startWorkflow(receiver)();
  await DBOS.startWorkflow(sender)(r.workflowID).then((h) => h.getResult());
  assert.deepEqual(await r.getResult(), { onTopic: ['x1', 'x2', 'x3'], onDefault: 'default-1' });
  assert.deepEqual(await stepNames(r.workflowID), [
    '0:DBOS.recv', '1:DBOS.sleep', '2:DBOS.recv', '3:DBOS.sleep', '4:DBOS.recv', '5:DBOS.sleep', '6:DBOS.recv', '7:DBOS.sleep',
  ]);
});

test('a send from outside with an idempotency key is delivered once', async () => {
  const r = await DBOS.startWorkflow(recvTwice)('k', 0.3);
  await DBOS.send(r.workflowID, 'once', 'k', 'key-1');
  await DBOS.send(r.workflowID, 'once', 'k', 'key-1');
  assert.deepEqual(await r.getResult(), ['once', null]);
});

test('recv gives null when its timeout passes, recording the receive and its deadline', async () => {
  const h = await DBOS.startWorkflow(recvWithTimeout)(0.3);
  const { got, elapsed } = await h.getResult();
  assert.equal(got, null);
  assert.ok(elapsed >= 290, `waited ${elapsed} ms`);
  const recorded = await steps(h.workflowID);
  assert.deepEqual(recorded.map((s) => s.name), ['DBOS.recv', 'DBOS.sleep']);
  // The recorded "nothing" reads back as null with the workflow's serializer.
  assert.equal(recorded[0].error, null);
  assert.notEqual(recorded[0].output, null);
});

test('recv takes DBOS TypeScript\'s default timeout of 60 seconds', async () => {
  const h = await DBOS.startWorkflow(recvDefault)();
  const deadline = await eventually(async () => (await steps(h.workflowID)).find((s) => s.function_id === 1));
  assert.equal(deadline.name, 'DBOS.sleep');
  const waitsFor = wakeTimeMs(deadline.output) - (deadline.completed_at_epoch_ms ?? Date.now());
  assert.ok(Math.abs(waitsFor - 60_000) < 5_000, `the deadline is ${waitsFor} ms after the recv began`);
  await DBOS.send(h.workflowID, 'plain');
  assert.equal(await h.getResult(), 'plain');
});

test('a replayed recv returns what it recorded and consumes nothing', async () => {
  const h = await DBOS.startWorkflow(recvReplayed)();
  await DBOS.send(h.workflowID, 'a', 't');
  await DBOS.send(h.workflowID, 'b', 't');
  assert.equal(await DBOS.getEvent(h.workflowID, 'first', 10), 'a');
  const before = bodyRuns;
  await cancelAndResume(h.workflowID);
  // The resumed run waits at the gate again; its first recv was replayed, so 'b' is still there.
  await DBOS.send(h.workflowID, 'g', 'gate');
  assert.deepEqual(await DBOS.retrieveWorkflow(h.workflowID).getResult(), ['a', 'g', 'b']);
  assert.equal(bodyRuns, before + 1);
  assert.deepEqual(await stepNames(h.workflowID), [
    '0:DBOS.recv', '1:DBOS.sleep', '2:DBOS.setEvent', '3:DBOS.recv', '4:DBOS.sleep', '5:DBOS.recv', '6:DBOS.sleep',
  ]);
});

test('a send to a missing workflow: an error outside, a recorded step from a workflow', async () => {
  await assert.rejects(DBOS.send('no-such-workflow', 'x'), (err: Error) => {
    assert.ok(err instanceof DBOSNonExistentWorkflowError);
    assert.equal(err.message, 'Sent to non-existent destination workflow UUID: no-such-workflow');
    return true;
  });
  const h = await DBOS.startWorkflow(sendToMissing)('also-missing');
  assert.equal(await h.getResult(), 'DBOSNonExistentWorkflowError: Sent to non-existent destination workflow UUID: also-missing');
  const [step] = await steps(h.workflowID);
  assert.equal(step.name, 'DBOS.send');
  assert.equal(step.output, null);
  assert.match(step.error ?? '', /non-existent destination/);
});

test('a replayed send raises its recorded failure again and sends nothing', async () => {
  const h = await DBOS.startWorkflow(sendToMissingThenWait)();
  const message = 'Sent to non-existent destination workflow UUID: missing-on-replay';
  assert.equal(await DBOS.getEvent(h.workflowID, 'failed', 10), message);
  await cancelAndResume(h.workflowID);
  await DBOS.send(h.workflowID, 'g', 'gate');
  assert.equal(await DBOS.retrieveWorkflow(h.workflowID).getResult(), `${message}|g`);
  assert.deepEqual(await stepNames(h.workflowID), ['0:DBOS.send', '1:DBOS.setEvent', '2:DBOS.recv', '3:DBOS.sleep']);
});

test('a send from inside a step is delivered and covered by the step', async () => {
  const r = await DBOS.startWorkflow(recvTwice)('s', 0.1);
  const h = await DBOS.startWorkflow(sendFromStep)(r.workflowID);
  await h.getResult();
  assert.deepEqual(await r.getResult(), ['from-a-step', null]);
  assert.deepEqual(await stepNames(h.workflowID), ['0:warmUp', '1:sendingStep']);
});

test('the calls DBOS allows only in workflow code refuse elsewhere', async () => {
  await assert.rejects(DBOS.recv('t'), new DBOSInvalidWorkflowTransitionError('Attempt to call `DBOS.recv` outside of a workflow'));
  await assert.rejects(DBOS.setEvent('k', 1), new DBOSInvalidWorkflowTransitionError('Attempt to call `DBOS.setEvent` outside of a workflow'));
  await assert.rejects(DBOS.writeStream('k', 1), DBOSInvalidWorkflowTransitionError);
  await assert.rejects(DBOS.closeStream('k'), DBOSInvalidWorkflowTransitionError);
  await assert.rejects(DBOS.patch('p'), DBOSInvalidWorkflowTransitionError);
  await assert.rejects(DBOS.sleep(Number.NaN), new DBOSError('sleep duration must be a finite number of milliseconds'));
  await assert.rejects(DBOS.recv('t', { pollingIntervalMs: 0 }), DBOSInvalidWorkflowTransitionError);
  const h = await DBOS.startWorkflow(misuse)();
  assert.deepEqual(await h.getResult(), [
    'recvInStep: DBOSInvalidWorkflowTransitionError: Invalid call to `DBOS.recv` inside a `step` or `transaction`',
    'setEventInStep: DBOSInvalidWorkflowTransitionError: Invalid call to `DBOS.setEvent` inside a `step` or `transaction`',
    'getEventInStep: DBOSInvalidWorkflowTransitionError: Invalid call to `DBOS.getEvent` inside a `step` or `transaction`',
    'patchInStep: DBOSInvalidWorkflowTransitionError: `DBOS.patch` must be called from a workflow, and not within a step',
  ]);
});

// ---- events ----------------------------------------------------------------------

test('setEvent publishes; getEvent reads it from outside and from a workflow', async () => {
  const p = await DBOS.startWorkflow(publisher)();
  await p.getResult();
  assert.equal(await DBOS.getEvent(p.workflowID, 'k'), 'v2');
  assert.deepEqual(await DBOS.getEvent(p.workflowID, 'p', 1), { portable: true });
  assert.equal(await DBOS.getEvent(p.workflowID, 'n', 1), null);
  assert.deepEqual(await stepNames(p.workflowID), ['0:DBOS.setEvent', '1:DBOS.setEvent', '2:DBOS.setEvent', '3:DBOS.setEvent']);
  // The portable event is written as DBOS TypeScript writes it, for readers in any language.
  const all = (await requireEngine().request('get_all_events', { workflow_id: p.workflowID })).events as Array<Record<string, string>>;
  const portable = all.find((ev) => ev.key === 'p')!;
  assert.equal(portable.serialization, 'portable_json');
  assert.equal(portable.value, '{"portable":true}');

  const r = await DBOS.startWorkflow(eventReader)(p.workflowID, 'k', 5);
  assert.equal(await r.getResult(), 'v2');
  assert.deepEqual(await stepNames(r.workflowID), ['0:DBOS.getEvent', '1:DBOS.sleep']);
});

test('getEvent waits for the event to be set', async () => {
  const setter = await DBOS.startWorkflow(lateSetter)();
  const fromWorkflow = await DBOS.startWorkflow(eventReader)(setter.workflowID, 'late', 30);
  const fromOutside = DBOS.getEvent<string>(setter.workflowID, 'late', { timeoutSeconds: 30 });
  await DBOS.send(setter.workflowID, 'now', 'go');
  assert.equal(await fromOutside, 'now');
  assert.equal(await fromWorkflow.getResult(), 'now');
});

test('getEvent gives null when its timeout passes, outside and in a workflow', async () => {
  const p = await DBOS.startWorkflow(publisher)();
  await p.getResult();
  const started = Date.now();
  assert.equal(await DBOS.getEvent(p.workflowID, 'never', 0.2), null);
  assert.ok(Date.now() - started >= 190);
  assert.equal(await DBOS.getEvent('no-such-workflow', 'k', { deadlineEpochMS: Date.now() + 100 }), null);
  const r = await DBOS.startWorkflow(eventReader)(p.workflowID, 'never', 0.2);
  assert.equal(await r.getResult(), null);
  assert.deepEqual(await stepNames(r.workflowID), ['0:DBOS.getEvent', '1:DBOS.sleep']);
});

// ---- streams ---------------------------------------------------------------------

async function collect<T>(gen: AsyncGenerator<T, void, unknown>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of gen) out.push(v);
  return out;
}

test('a closed stream is read in order to its end', async () => {
  const w = await DBOS.startWorkflow(streamWriter)(true);
  assert.equal(await w.getResult(), 'written');
  assert.deepEqual(await collect(DBOS.readStream(w.workflowID, 's')), [1, { two: 2 }, 'three']);
  assert.deepEqual(await collect(DBOS.readStream(w.workflowID, 's', { offset: 1 })), [{ two: 2 }, 'three']);
  assert.deepEqual(await stepNames(w.workflowID), ['0:DBOS.writeStream', '1:writeFromStep', '2:DBOS.writeStream', '3:DBOS.closeStream']);
  assert.deepEqual(await DBOS.readStreamOffset(w.workflowID, 's', 1), { two: 2 });
  // Past the end of a closed stream no value will ever come.
  await assert.rejects(DBOS.readStreamOffset(w.workflowID, 's', 3), (err: Error) => {
    assert.ok(err instanceof DBOSStreamTimeoutError);
    assert.equal(err.message, `No value arrived on stream s of workflow ${w.workflowID}`);
    return true;
  });
});

test('the stream of a workflow that ended without closing it stops at its last value', async () => {
  const w = await DBOS.startWorkflow(streamWriter)(false);
  await w.getResult();
  assert.deepEqual(await collect(DBOS.readStream(w.workflowID, 's')), [1, { two: 2 }, 'three']);
});

test('a stream is read while it is written, and a reader times out per value', async () => {
  const w = await DBOS.startWorkflow(pacedWriter)(3);
  const reader = DBOS.readStream<string>(w.workflowID, 'paced');
  const seen: string[] = [];
  for (const v of ['a', 'b', 'c']) {
    await DBOS.send(w.workflowID, v, 'next');
    const next = await reader.next();
    assert.equal(next.done, false);
    seen.push(next.value as string);
  }
  assert.deepEqual(seen, ['a', 'b', 'c']);
  assert.deepEqual(await reader.next(), { done: true, value: undefined });

  const idle = await DBOS.startWorkflow(pacedWriter)(1);
  await assert.rejects(DBOS.readStreamOffset(idle.workflowID, 'paced', 0, { timeoutSeconds: 0.2 }), (err: Error) => {
    assert.ok(err instanceof DBOSStreamTimeoutError);
    assert.equal(err.message, `No value arrived on stream paced of workflow ${idle.workflowID} within 200ms`);
    return true;
  });
  await assert.rejects(collect(DBOS.readStream(idle.workflowID, 'paced', { timeoutSeconds: 0.1 })), DBOSStreamTimeoutError);
  // A reader given up while it waits: its wait ends and the generator is done.
  const abandoned = DBOS.readStream(idle.workflowID, 'paced');
  const pending = abandoned.next();
  await abandoned.return();
  assert.deepEqual(await pending, { done: true, value: undefined });
  await DBOS.send(idle.workflowID, 'z', 'next');
  await idle.getResult();
  await assert.rejects(collect(DBOS.readStream('no-such-workflow', 'k')), new DBOSNonExistentWorkflowError('Workflow no-such-workflow does not exist'));
  await assert.rejects(collect(DBOS.readStream(idle.workflowID, 'paced', { offset: -1 })), new DBOSError('offset must be a non-negative integer'));
});

test('a replayed writer appends nothing twice', async () => {
  const w = await DBOS.startWorkflow(replayedWriter)();
  assert.equal(await DBOS.getEvent(w.workflowID, 'wrote', 10), true);
  await cancelAndResume(w.workflowID);
  await DBOS.send(w.workflowID, 'b', 'gate');
  await DBOS.retrieveWorkflow(w.workflowID).getResult();
  assert.deepEqual(await collect(DBOS.readStream(w.workflowID, 'r')), ['a', 'b']);
});

test('reads from workflow code are recorded one step per value, as DBOS TypeScript records them', async () => {
  const w = await DBOS.startWorkflow(streamWriter)(true);
  await w.getResult();
  const r = await DBOS.startWorkflow(streamReader)(w.workflowID, 0);
  assert.deepEqual(await r.getResult(), { seen: [1, { two: 2 }, 'three'], atOne: { two: 2 } });
  assert.deepEqual(await stepNames(r.workflowID), [
    '0:DBOS.readStream', '1:DBOS.readStream', '2:DBOS.readStream', '3:DBOS.readStream', '4:DBOS.readStreamOffset',
  ]);
});

// ---- durable sleep ---------------------------------------------------------------

test('a durable sleep lasts at least its duration and records its wake time', async () => {
  const started = Date.now();
  const h = await DBOS.startWorkflow(sleeper)(300);
  const slept = await h.getResult();
  assert.ok(slept >= 300, `slept ${slept} ms`);
  assert.ok(Date.now() - started >= 300);
  const [step] = await steps(h.workflowID);
  assert.equal(step.name, 'DBOS.sleep');
  const wakeAt = wakeTimeMs(step.output);
  assert.ok(wakeAt >= started + 300 - 50 && wakeAt <= Date.now() + 50, `wake time ${wakeAt}`);

  const v = await DBOS.startWorkflow(sleepVariants)();
  assert.equal(await v.getResult(), 'after');
  assert.deepEqual(await stepNames(v.workflowID), ['1:DBOS.sleep', '2:DBOS.sleep', '3:afterSleeps']);
});

test('a sleep replayed after the run is handed back sleeps only what is left', async () => {
  const h = await DBOS.startWorkflow(sleeper)(1500);
  const first = await eventually(async () => (await steps(h.workflowID)).find((s) => s.name === 'DBOS.sleep'));
  const wakeAt = wakeTimeMs(first.output);
  const e = requireEngine();
  await e.request('cancel_workflow', { workflow_id: h.workflowID });
  await assert.rejects(DBOS.retrieveWorkflow(h.workflowID).getResult(), DBOSAwaitedWorkflowCancelledError);
  // Time passing is what this test is about: part of the sleep goes by while no run holds the workflow.
  await new Promise((r) => setTimeout(r, 700));
  await e.request('resume_workflow', { workflow_id: h.workflowID });
  const resumedAt = Date.now();
  const slept = await DBOS.retrieveWorkflow<number>(h.workflowID).getResult();
  const finishedAt = Date.now();
  // The replayed run slept until the first wake time, not a full 1500 ms from its own start.
  assert.ok(slept < 1500 - 500, `the replay slept ${slept} ms`);
  assert.ok(finishedAt >= wakeAt - 50, `finished ${wakeAt - finishedAt} ms before the wake time`);
  assert.ok(finishedAt < resumedAt + 1500, 'the replay slept the whole duration again');
  const [again] = await steps(h.workflowID);
  assert.equal(again.output, first.output);
});

// ---- patches ----------------------------------------------------------------------

test('patch: new runs take the patched path, runs that predate it keep theirs; deprecatePatch follows', async () => {
  patchCode = 'old';
  const before = await DBOS.startWorkflow(patched)();
  await eventually(async () => ((await steps(before.workflowID)).length >= 2 ? true : undefined));

  patchCode = 'patched';
  const fresh = await DBOS.startWorkflow(patched)();
  await DBOS.send(fresh.workflowID, 'g', 'gate');
  assert.equal(await fresh.getResult(), 'new:g');
  assert.deepEqual(await stepNames(fresh.workflowID), ['0:DBOS.patch-v2', '1:newStep', '2:DBOS.recv', '3:DBOS.sleep']);
  // The run from before the patch replays with the patched code: patch() sees its oldStep and says no.
  await cancelAndResume(before.workflowID);
  await DBOS.send(before.workflowID, 'g', 'gate');
  assert.equal(await DBOS.retrieveWorkflow(before.workflowID).getResult(), 'old:g');
  assert.deepEqual(await stepNames(before.workflowID), ['0:oldStep', '1:DBOS.recv', '2:DBOS.sleep']);

  const patchedRun = await DBOS.startWorkflow(patched)();
  await eventually(async () => ((await steps(patchedRun.workflowID)).length >= 3 ? true : undefined));
  patchCode = 'deprecated';
  // A run recorded with the marker replays through deprecatePatch, which steps over it.
  await cancelAndResume(patchedRun.workflowID);
  await DBOS.send(patchedRun.workflowID, 'g', 'gate');
  assert.equal(await DBOS.retrieveWorkflow(patchedRun.workflowID).getResult(), 'new:g');
  // A new run under deprecatePatch records no marker.
  const deprecated = await DBOS.startWorkflow(patched)();
  await DBOS.send(deprecated.workflowID, 'g', 'gate');
  assert.equal(await deprecated.getResult(), 'new:g');
  assert.deepEqual(await stepNames(deprecated.workflowID), ['0:newStep', '1:DBOS.recv', '2:DBOS.sleep']);
});

// ---- a worker killed in DBOS.recv --------------------------------------------------

function commWorker(env: Record<string, string>): Proc {
  return Proc.node(join(__dirname, 'apps', 'comm_worker.js'), env);
}

test('a worker killed while it waits in DBOS.recv: another worker gets the message and finishes the workflow', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dbos-comm-crash-'));
  const countFile = join(dir, 'steps.log');
  const workflowID = `crash-${Date.now()}`;
  const env = {
    COMM_WORKER_CONFIG: JSON.stringify(agent.config('comm-crash-app')),
    COMM_WORKER_COUNT_FILE: countFile,
    COMM_WORKER_WORKFLOW_ID: workflowID,
  };
  const first = commWorker({ ...env, COMM_WORKER_MODE: 'start' });
  let second: Proc | undefined;
  try {
    await first.waitFor(/^started /);
    // Blocked in recv: its deadline (the DBOS.sleep after the recv's id) is recorded when the wait begins.
    assert.equal(await DBOS.getEvent(workflowID, 'phase', 30), 'receiving');
    await eventually(async () => ((await steps(workflowID)).some((s) => s.function_id === 3 && s.name === 'DBOS.sleep') ? true : undefined));
    await first.kill();

    await DBOS.send(workflowID, 'after-the-kill', 'crash');
    second = commWorker({ ...env, COMM_WORKER_MODE: 'recover' });
    assert.equal((await second.waitFor(/^done .*$/))[0], 'done got:after-the-kill');
    assert.equal(await DBOS.retrieveWorkflow(workflowID).getResult(), 'got:after-the-kill');
    // The step before the recv ran once, in the first worker; the one after it once, in the second.
    const log = readFileSync(countFile, 'utf8').trim().split('\n');
    assert.deepEqual(log.map((l) => l.split(' ')[0]), ['before', 'after']);
    assert.notEqual(log[0].split(' ')[1], log[1].split(' ')[1], 'both steps ran in one process');
    assert.deepEqual(await stepNames(workflowID), ['0:beforeRecv', '1:DBOS.setEvent', '2:DBOS.recv', '3:DBOS.sleep', '4:afterRecv']);
  } finally {
    await Promise.all([first.kill(), second?.kill('SIGTERM')]);
    rmSync(dir, { recursive: true, force: true });
  }
});
