// Registration against a real agent: a workflow declared after launch runs at
// once, and after the agent restarts (the worker reconnects and announces
// early and late declarations alike); launch twice; shutdown then launch.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS } from '../src';
import { Agent, freshAgent } from './harness';

let agent: Agent;
const early = DBOS.registerWorkflow(async (x: number) => `early ${x}`, { name: 'earlyWorkflow' });

before(async () => {
  agent = await freshAgent('registration');
  DBOS.setConfig(agent.config('registration-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

let late: ((x: number) => Promise<string>) | undefined;

test('a workflow declared after launch can be started at once', async () => {
  late = DBOS.registerWorkflow(async (x: number) => `late ${x}`, { name: 'lateWorkflow' });
  const h = await DBOS.startWorkflow(late)(1);
  assert.equal(await h.getResult(), 'late 1');
  assert.equal(await late(2), 'late 2');
});

test('DBOS.launch twice is harmless', async () => {
  await DBOS.launch();
  assert.equal(await early(1), 'early 1');
});

test('after the agent is killed and restarted, the worker reconnects and serves early and late workflows', async () => {
  await agent.kill();
  await agent.start();
  // The restarted agent recovers nothing of ours; starts wait for the new connection.
  assert.equal(await (await DBOS.startWorkflow(early)(3)).getResult(), 'early 3');
  assert.equal(await (await DBOS.startWorkflow(late!)(4)).getResult(), 'late 4');
  const later = DBOS.registerWorkflow(async (x: number) => `later ${x}`, { name: 'laterWorkflow' });
  assert.equal(await later(5), 'later 5');
});

test('shutdown then launch again', async () => {
  await DBOS.shutdown();
  assert.equal(DBOS.isInitialized(), false);
  await DBOS.launch();
  assert.equal(DBOS.isInitialized(), true);
  assert.equal(await early(6), 'early 6');
  assert.equal(await late!(7), 'late 7');
});
