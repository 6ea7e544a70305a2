// Steps against a real agent, as DBOS TypeScript 5.3 defines them: retries
// with backoff, shouldRetry, timeouts, the step's context, steps outside a
// workflow and inside a step, the round-tripped return value, and the
// configuration checks.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS } from '../src';
import { DBOSError, DBOSMaxStepRetriesError, DBOSStepTimeoutError } from '../src/error';
import { Agent, freshAgent } from './harness';
import { officialSerialization as official, officialErrors } from './official';
import { stepRows } from './apps/db';

let agent: Agent;

// ---- retries ---------------------------------------------------------------

const attemptTimes: number[] = [];
const flaky = DBOS.registerStep(
  async (failures: number) => {
    attemptTimes.push(Date.now());
    const n = attemptTimes.length;
    if (n <= failures) throw new Error(`boom ${n}`);
    return `ok after ${n}`;
  },
  { name: 'flaky', retriesAllowed: true, maxAttempts: 3, intervalSeconds: 0.1, backoffRate: 3 },
);

const flakyWorkflow = DBOS.registerWorkflow(
  async (failures: number) => {
    try {
      return { value: await flaky(failures) };
    } catch (e) {
      const err = e as DBOSMaxStepRetriesError;
      return {
        caught: {
          isMax: err instanceof DBOSMaxStepRetriesError,
          name: err.name,
          code: err.dbosErrorCode,
          message: err.message,
          errors: (err.errors ?? []).map((x) => x.message),
        },
      };
    }
  },
  { name: 'flakyWorkflow' },
);

const throwingFlaky = DBOS.registerWorkflow(async () => flaky(10), { name: 'throwingFlaky' });

// ---- shouldRetry --------------------------------------------------------------

let predicateCalls = 0;
let predicateAttempts = 0;
class NotRetryable extends Error {}
const picky = DBOS.registerStep(
  async (kind: string) => {
    predicateAttempts++;
    if (kind === 'stop') throw new NotRetryable('do not retry me');
    throw new Error('predicate will throw');
  },
  {
    name: 'picky',
    retriesAllowed: true,
    maxAttempts: 5,
    intervalSeconds: 0,
    shouldRetry: (e: unknown) => {
      predicateCalls++;
      if (e instanceof NotRetryable) return false;
      throw new Error('the predicate failed');
    },
  },
);
const pickyWorkflow = DBOS.registerWorkflow(
  async (kind: string) => {
    try {
      await picky(kind);
      return 'no error';
    } catch (e) {
      return `${(e as Error).constructor.name}: ${(e as Error).message}`;
    }
  },
  { name: 'pickyWorkflow' },
);

// ---- timeouts -------------------------------------------------------------------

let seenSignal: AbortSignal | undefined;
const slow = DBOS.registerStep(
  async () => {
    seenSignal = DBOS.stepStatus?.timeoutSignal;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 5000);
      seenSignal?.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
    return 'finished';
  },
  { name: 'slow', timeoutMS: 80 },
);
const slowWorkflow = DBOS.registerWorkflow(
  async () => {
    try {
      return await slow();
    } catch (e) {
      const err = e as DBOSStepTimeoutError;
      return { timedOut: err instanceof DBOSStepTimeoutError, message: err.message, stepName: err.stepName, timeoutMS: err.timeoutMS };
    }
  },
  { name: 'slowWorkflow' },
);

let timeoutRetryAttempts = 0;
const slowThenFast = DBOS.registerStep(
  async () => {
    timeoutRetryAttempts++;
    if (timeoutRetryAttempts === 1) await new Promise((r) => setTimeout(r, 1000));
    return `attempt ${timeoutRetryAttempts}`;
  },
  { name: 'slowThenFast', timeoutMS: 60, retriesAllowed: true, maxAttempts: 2, intervalSeconds: 0 },
);
const slowThenFastWorkflow = DBOS.registerWorkflow(async () => slowThenFast(), { name: 'slowThenFastWorkflow' });

// ---- the step's context ---------------------------------------------------------

interface Seen {
  stepID?: number;
  isInStep: boolean;
  isInWorkflow: boolean;
  isWithinWorkflow: boolean;
  workflowID?: string;
  currentAttempt?: number;
  maxAttempts?: number;
  hasTimeoutSignal: boolean;
  hasCancelSignal: boolean;
}
function seeContext(): Seen {
  const s = DBOS.stepStatus;
  return {
    stepID: DBOS.stepID,
    isInStep: DBOS.isInStep(),
    isInWorkflow: DBOS.isInWorkflow(),
    isWithinWorkflow: DBOS.isWithinWorkflow(),
    workflowID: DBOS.workflowID,
    currentAttempt: s?.currentAttempt,
    maxAttempts: s?.maxAttempts,
    hasTimeoutSignal: s?.timeoutSignal !== undefined,
    hasCancelSignal: s?.cancelSignal !== undefined,
  };
}
const plainStep = DBOS.registerStep(async () => seeContext(), { name: 'plainStep' });
const retriedStep = DBOS.registerStep(async () => seeContext(), { name: 'retriedStep', retriesAllowed: true, maxAttempts: 4 });
const timedStep = DBOS.registerStep(async () => seeContext(), { name: 'timedStep', timeoutMS: 10_000 });
const innerStep = DBOS.registerStep(async () => seeContext(), { name: 'innerStep' });
const outerStep = DBOS.registerStep(async () => ({ outer: seeContext(), inner: await innerStep() }), { name: 'outerStep' });

const contextWorkflow = DBOS.registerWorkflow(
  async () => {
    const inWorkflow = seeContext();
    const a = await plainStep();
    const b = await retriedStep();
    const c = await timedStep();
    const d = await outerStep();
    const e = await DBOS.runStep(async () => seeContext(), { name: 'inline' });
    return { inWorkflow, a, b, c, d, e };
  },
  { name: 'contextWorkflow' },
);

// ---- return values ------------------------------------------------------------------

class Money {
  constructor(
    readonly amount: number,
    readonly currency: string,
  ) {}
  label(): string {
    return `${this.amount} ${this.currency}`;
  }
}
const when = new Date('2024-05-06T07:08:09.010Z');
const valueStep = DBOS.registerStep(
  async () => ({ when, money: new Money(12, 'EUR'), big: 10n ** 20n, set: new Set([1, 2]), map: new Map([['k', 1]]) }),
  { name: 'valueStep' },
);
const valueWorkflow = DBOS.registerWorkflow(
  async () => {
    const v = await valueStep();
    return {
      isDate: v.when instanceof Date,
      time: v.when.getTime(),
      isMoney: v.money instanceof Money,
      money: { ...v.money },
      big: v.big,
      set: v.set instanceof Set ? [...v.set] : 'not a set',
      map: v.map instanceof Map ? [...v.map] : 'not a map',
    };
  },
  { name: 'valueWorkflow' },
);

// ---- configuration checks --------------------------------------------------------------

const lateCheck = DBOS.registerWorkflow(
  async () => {
    try {
      await DBOS.runStep(async () => 1, { name: 'badInline', timeoutMS: 0 });
      return 'accepted';
    } catch (e) {
      return `${(e as Error).constructor.name}: ${(e as Error).message}`;
    }
  },
  { name: 'lateCheck' },
);

before(async () => {
  agent = await freshAgent('steps');
  DBOS.setConfig(agent.config('steps-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

test('retriesAllowed: a step is retried with intervalSeconds growing by backoffRate until it succeeds', async () => {
  attemptTimes.length = 0;
  const h = await DBOS.startWorkflow(flakyWorkflow)(2);
  assert.deepEqual(await h.getResult(), { value: 'ok after 3' });
  assert.equal(attemptTimes.length, 3);
  const first = attemptTimes[1] - attemptTimes[0];
  const second = attemptTimes[2] - attemptTimes[1];
  assert.ok(first >= 95 && first < 290, `first interval ${first} ms (0.1 s)`);
  assert.ok(second >= 290, `second interval ${second} ms (0.1 s * 3)`);
  const rows = await stepRows(agent.databaseUrl, h.workflowID);
  assert.deepEqual(
    rows.map((r) => [r.function_id, r.function_name, r.error]),
    [[0, 'flaky', null]],
  );
  assert.equal(await official.DBOSJSON.parse(rows[0].output!), 'ok after 3');
});

test('retriesAllowed: after maxAttempts the step raises DBOSMaxStepRetriesError with every error, as DBOS TS', async () => {
  attemptTimes.length = 0;
  const h = await DBOS.startWorkflow(flakyWorkflow)(10);
  const r = (await h.getResult()) as { caught: { isMax: boolean; name: string; code: number; message: string; errors: string[] } };
  assert.equal(attemptTimes.length, 3);
  const expected = new officialErrors.DBOSMaxStepRetriesError('flaky', 3, [new Error('boom 1'), new Error('boom 2'), new Error('boom 3')]);
  assert.deepEqual(r.caught, {
    isMax: true,
    name: expected.name,
    code: expected.dbosErrorCode,
    message: expected.message,
    errors: ['boom 1', 'boom 2', 'boom 3'],
  });
  assert.equal(
    r.caught.message,
    'Step flaky has exceeded its maximum of 3 retries. Previous errors: Error 1: boom 1. Error 2: boom 2. Error 3: boom 3',
  );
  // The error is the step's record, readable by DBOS TS.
  const rows = await stepRows(agent.databaseUrl, h.workflowID);
  assert.equal(rows.length, 1);
  const stored = await official.deserializeResError(rows[0].error, null, official.DBOSJSON);
  assert.equal(stored.message, expected.message);
});

test('a workflow that lets DBOSMaxStepRetriesError through delivers it to getResult (name, message, errors)', async () => {
  attemptTimes.length = 0;
  const h = await DBOS.startWorkflow(throwingFlaky)();
  const err = await h.getResult().then(
    () => assert.fail('expected an error'),
    (e: unknown) => e as DBOSMaxStepRetriesError,
  );
  assert.ok(err instanceof DBOSMaxStepRetriesError, `got ${String(err)}`);
  assert.match(err.message, /^Step flaky has exceeded its maximum of 3 retries\. Previous errors: Error 1: boom 1\./);
  assert.equal(err.errors.length, 3);
  // Read back through a fresh handle: the stored error, deserialized as DBOS TS does.
  const again = await DBOS.retrieveWorkflow(h.workflowID).getResult().then(
    () => assert.fail('expected an error'),
    (e: unknown) => e as Error,
  );
  assert.equal(again.message, err.message);
  const status = await DBOS.getWorkflowStatus(h.workflowID);
  assert.equal(status?.status, 'ERROR');
});

test('shouldRetry returning false stops at once with the step\'s own error', async () => {
  predicateCalls = 0;
  predicateAttempts = 0;
  assert.equal(await pickyWorkflow('stop'), 'NotRetryable: do not retry me');
  assert.equal(predicateAttempts, 1);
  assert.equal(predicateCalls, 1);
});

test('a throwing shouldRetry stops at once with the predicate\'s error', async () => {
  predicateCalls = 0;
  predicateAttempts = 0;
  assert.equal(await pickyWorkflow('throw'), 'Error: the predicate failed');
  assert.equal(predicateAttempts, 1);
  assert.equal(predicateCalls, 1);
});

test('timeoutMS: the step raises DBOSStepTimeoutError and its timeoutSignal is aborted', async () => {
  seenSignal = undefined;
  const h = await DBOS.startWorkflow(slowWorkflow)();
  const expected = new officialErrors.DBOSStepTimeoutError('slow', 80);
  assert.deepEqual(await h.getResult(), { timedOut: true, message: expected.message, stepName: 'slow', timeoutMS: 80 });
  assert.equal(expected.message, 'Step slow timed out after 80ms');
  const signal = seenSignal as AbortSignal | undefined;
  assert.ok(signal, 'the step saw a timeoutSignal');
  assert.equal(signal.aborted, true);
  assert.ok(signal.reason instanceof DBOSStepTimeoutError);
  const rows = await stepRows(agent.databaseUrl, h.workflowID);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].output, null);
  assert.equal((await official.deserializeResError(rows[0].error, null, official.DBOSJSON)).message, expected.message);
});

test('timeoutMS with retries: a timed-out attempt is retried', async () => {
  timeoutRetryAttempts = 0;
  assert.equal(await slowThenFastWorkflow(), 'attempt 2');
  assert.equal(timeoutRetryAttempts, 2);
});

test('DBOS.stepStatus, stepID and isInStep inside steps; a step inside a step is a plain call', async () => {
  const h = await DBOS.startWorkflow(contextWorkflow)();
  const r = await h.getResult();
  const wfid = h.workflowID;
  const base = { isInStep: true, isInWorkflow: false, isWithinWorkflow: true, workflowID: wfid, hasCancelSignal: true };
  assert.deepEqual(r.inWorkflow, {
    stepID: undefined,
    isInStep: false,
    isInWorkflow: true,
    isWithinWorkflow: true,
    workflowID: wfid,
    currentAttempt: undefined,
    maxAttempts: undefined,
    hasTimeoutSignal: false,
    hasCancelSignal: false,
  });
  assert.deepEqual(r.a, { ...base, stepID: 0, currentAttempt: undefined, maxAttempts: undefined, hasTimeoutSignal: false });
  assert.deepEqual(r.b, { ...base, stepID: 1, currentAttempt: 1, maxAttempts: 4, hasTimeoutSignal: false });
  assert.deepEqual(r.c, { ...base, stepID: 2, currentAttempt: undefined, maxAttempts: undefined, hasTimeoutSignal: true });
  assert.deepEqual(r.d.outer, { ...base, stepID: 3, currentAttempt: undefined, maxAttempts: undefined, hasTimeoutSignal: false });
  // The inner step ran as a plain call within the outer one: same step id, no record of its own.
  assert.deepEqual(r.d.inner, r.d.outer);
  assert.deepEqual(r.e, { ...base, stepID: 4, currentAttempt: undefined, maxAttempts: undefined, hasTimeoutSignal: false });
  const rows = await stepRows(agent.databaseUrl, wfid);
  assert.deepEqual(
    rows.map((x) => [x.function_id, x.function_name]),
    [
      [0, 'plainStep'],
      [1, 'retriedStep'],
      [2, 'timedStep'],
      [3, 'outerStep'],
      [4, 'inline'],
    ],
  );
});

test('a step called outside a workflow is a plain call: no retries, no timeout, no record', async () => {
  const seen = await plainStep();
  assert.deepEqual(seen, {
    stepID: undefined,
    isInStep: false,
    isInWorkflow: false,
    isWithinWorkflow: false,
    workflowID: undefined,
    currentAttempt: undefined,
    maxAttempts: undefined,
    hasTimeoutSignal: false,
    hasCancelSignal: false,
  });
  attemptTimes.length = 0;
  await assert.rejects(flaky(10), /boom 1/);
  assert.equal(attemptTimes.length, 1, 'no retries outside a workflow');
  // The step body is the application's: a plain call returns its value as is.
  const v = await valueStep();
  assert.ok(v.money instanceof Money);
  assert.equal(await DBOS.runStep(async () => 'inline', { name: 'outside' }), 'inline');
});

test('a step returns its value as stored: a Date stays a Date, a class instance is what DBOS TS revives', async () => {
  const r = await valueWorkflow();
  const revived = (await official.DBOSJSON.parse(official.DBOSJSON.stringify(new Money(12, 'EUR')))) as object;
  assert.equal(r.isDate, true);
  assert.equal(r.time, when.getTime());
  assert.equal(r.isMoney, revived instanceof Money);
  assert.deepEqual(r.money, { ...revived });
  assert.equal(r.big, 10n ** 20n);
  assert.deepEqual(r.set, [1, 2]);
  assert.deepEqual(r.map, [['k', 1]]);
});

test('step configuration is checked as DBOS TS checks it (validateStepConfig)', async () => {
  const messageOf = (fn: () => unknown): string => {
    try {
      fn();
    } catch (e) {
      assert.ok(e instanceof DBOSError, `a DBOSError, got ${String(e)}`);
      return e.message;
    }
    return 'accepted';
  };
  for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.equal(
      messageOf(() => DBOS.registerStep(async () => 1, { name: `bad${bad}`, timeoutMS: bad })),
      `Invalid timeoutMS (${bad}) in configuration of step bad${bad}: must be a positive number`,
    );
  }
  // DBOS TS checks nothing else: these are accepted.
  assert.equal(messageOf(() => DBOS.registerStep(async () => 1, { name: 'lenient', maxAttempts: 0, intervalSeconds: -1, backoffRate: 0 })), 'accepted');
  // The decorator names the step Class.method.
  assert.equal(
    messageOf(() => {
      class Decorated {
        @DBOS.step({ timeoutMS: -1 })
        static async m(): Promise<number> {
          return 1;
        }
      }
      return Decorated;
    }),
    'Invalid timeoutMS (-1) in configuration of step Decorated.m: must be a positive number',
  );
  // DBOS.runStep checks when it runs as a step (in a workflow), and outside one it is a plain call.
  assert.equal(await DBOS.runStep(async () => 'plain', { name: 'badOutside', timeoutMS: -1 }), 'plain');
  assert.equal(await lateCheck(), 'DBOSError: Invalid timeoutMS (0) in configuration of step badInline: must be a positive number');
});
