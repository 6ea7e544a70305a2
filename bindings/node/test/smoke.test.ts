import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { DBOS } from '../src';
import { Agent, freshAgent } from './harness';

let agent: Agent;
const calls: string[] = [];

const stepA = DBOS.registerStep(async (x: number) => {
  calls.push(`a${x}`);
  return x * 2;
}, { name: 'stepA' });

const wf = DBOS.registerWorkflow(async (x: number) => {
  const a = await stepA(x);
  const b = await DBOS.runStep(async () => a + 1, { name: 'plusOne' });
  return `${x}:${a}:${b}`;
}, { name: 'smokeWorkflow' });

before(async () => {
  agent = await freshAgent('smoke');
  DBOS.setConfig(agent.config('smoke-app') as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
});

test('a workflow with steps runs and its result is read back', async () => {
  const h = await DBOS.startWorkflow(wf)(3);
  assert.equal(await h.getResult(), '3:6:7');
  const status = await h.getStatus();
  assert.equal(status?.status, 'SUCCESS');
  assert.equal(status?.workflowName, 'smokeWorkflow');
  assert.equal(await DBOS.retrieveWorkflow(h.workflowID).getResult(), '3:6:7');
  assert.equal(await wf(4), '4:8:9');
});
