/**
 * Messages, events and streams crossing between the binding and the
 * official DBOS TypeScript SDK 5.3, both ways, on the system database the
 * agent serves: the official DBOSClient sends to a binding workflow and
 * reads a binding workflow's events and stream; a workflow the official SDK
 * runs (test/apps/official-comm.ts, a process of its own with its own
 * application and executor) receives from a binding workflow and reads its
 * events and stream, and sets events, writes a stream and sends for the
 * binding's DBOS, its workflows and its DBOSClient to read. Every value goes
 * in DBOS's default format (superjson: Date, Map, Set, bigint) and in
 * portable JSON, and each row carries the tag of the format it was written
 * in. Then a Python-binding workflow (test/apps/py_comm.py) and a
 * Node-binding workflow exchange portable messages through the same agent.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DBOSClient as OfficialClient } from '@dbos-inc/dbos-sdk';
import { DBOS } from '../src';
import { DBOSClient } from '../src/client';
import { Agent, freshAgent, LIBRARY, REPO, TRANSPORT } from './harness';
import { Proc } from './apps/proc';
import { query } from './apps/db';
import { portableDecoded, portableValue, richKinds, richValue } from './apps/comm-values';

const APP = 'interop-comm-app';
const WAIT = 30;
let agent: Agent;
let official: OfficialClient;
const procs: Proc[] = [];

async function collect<T>(reader: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of reader) out.push(v);
  return out;
}

/** Receives two messages on topic; says whether the first decoded to its rich kinds. */
const twoMessages = DBOS.registerWorkflow(
  async (topic: string) => {
    const first = await DBOS.recv<unknown>(topic, WAIT);
    const second = await DBOS.recv<unknown>(topic, WAIT);
    return { messages: [first, second], kinds: richKinds(first) };
  },
  { name: 'twoMessages' },
);

/** Sets two events and writes a stream of two values (default, portable); then sends both to destination, if any. */
const publisher = DBOS.registerWorkflow(
  async (destination: string | null) => {
    await DBOS.setEvent('rich', richValue());
    await DBOS.setEvent('portable', portableValue(), { serializationType: 'portable' });
    await DBOS.writeStream('values', richValue());
    await DBOS.writeStream('values', portableValue(), { serializationType: 'portable' });
    await DBOS.closeStream('values');
    if (destination !== null) {
      await DBOS.send(destination, richValue(), 'to-official');
      await DBOS.send(destination, portableValue(), 'to-official', undefined, { serializationType: 'portable' });
    }
    return 'published';
  },
  { name: 'publisher' },
);

/** Reads another workflow's events and stream from workflow code (recorded steps). */
const peerReader = DBOS.registerWorkflow(
  async (peer: string) => {
    const events = [await DBOS.getEvent<unknown>(peer, 'rich', WAIT), await DBOS.getEvent<unknown>(peer, 'portable', WAIT)];
    const stream = await collect(DBOS.readStream<unknown>(peer, 'values'));
    return { events, stream, kinds: [richKinds(events[0]), richKinds(stream[0])] };
  },
  { name: 'peerReader' },
);

/** Answers the Python workflow pyID's ping in portable JSON; returns the ping. */
const ponger = DBOS.registerWorkflow(
  async (pyID: string) => {
    const ping = await DBOS.recv<Record<string, unknown>>('ping', WAIT);
    const reply = { got: ping, from: 'node', count: 3, half: 0.5, at: new Date('2026-07-08T09:10:11.012Z'), none: null };
    await DBOS.send(pyID, reply, 'pong', undefined, { serializationType: 'portable' });
    return ping;
  },
  { name: 'ponger' },
);

before(async () => {
  agent = await freshAgent('interop_comm');
  DBOS.setConfig(agent.config(APP) as never);
  await DBOS.launch();
  official = await OfficialClient.create({ systemDatabaseUrl: agent.databaseUrl });
});

after(async () => {
  for (const p of procs) await p.kill();
  await official?.destroy();
  await DBOS.shutdown();
  await agent.cleanup();
});

/** The official SDK's program, running mode's workflow as workflowID with peer. */
function officialProgram(mode: 'reader' | 'writer', workflowID: string, peer: string): Proc {
  const p = Proc.node(join(__dirname, 'apps', 'official-comm.js'), {
    OFFICIAL_COMM_MODE: mode,
    OFFICIAL_COMM_DATABASE_URL: agent.databaseUrl,
    OFFICIAL_COMM_WORKFLOW_ID: workflowID,
    OFFICIAL_COMM_PEER_ID: peer,
  });
  procs.push(p);
  return p;
}

/** The serialization tags of a workflow's events by key, and of its stream by offset. */
async function eventTags(workflowID: string): Promise<Record<string, string>> {
  const rows = await query<{ key: string; serialization: string }>(
    agent.databaseUrl,
    'SELECT key, serialization FROM dbos.workflow_events WHERE workflow_uuid = $1',
    [workflowID],
  );
  return Object.fromEntries(rows.map((r) => [r.key, r.serialization]));
}

async function streamRows(workflowID: string): Promise<Array<{ value: string; serialization: string }>> {
  return query(agent.databaseUrl, `SELECT value, serialization FROM dbos.streams WHERE workflow_uuid = $1 AND key = 'values' ORDER BY "offset"`, [
    workflowID,
  ]);
}

/** The tags of the recorded DBOS.recv steps of a workflow, in order. */
async function recvTags(workflowID: string): Promise<string[]> {
  const rows = await query<{ serialization: string }>(
    agent.databaseUrl,
    `SELECT serialization FROM dbos.operation_outputs WHERE workflow_uuid = $1 AND function_name = 'DBOS.recv' ORDER BY function_id`,
    [workflowID],
  );
  return rows.map((r) => r.serialization);
}

/** What a publisher's (or the official writer's) rows hold: each value tagged with the format it was written in. */
async function assertPublished(workflowID: string): Promise<void> {
  assert.deepEqual(await eventTags(workflowID), { rich: 'js_superjson', portable: 'portable_json' });
  const rows = await streamRows(workflowID);
  assert.deepEqual(
    rows.map((r) => r.serialization),
    ['js_superjson', 'portable_json', 'portable_json'],
  );
  // Portable JSON is plain JSON any language parses; the stream ends with DBOS's closing marker.
  assert.deepEqual(JSON.parse(rows[1].value), portableDecoded());
  assert.equal(JSON.parse(rows[2].value), '__DBOS_STREAM_CLOSED__');
}

test('the official DBOSClient sends to a binding workflow that receives: superjson and portable messages arrive decoded', async () => {
  const handle = await DBOS.startWorkflow(twoMessages, { workflowID: 'ic-recv-1' })('to-binding');
  await official.send('ic-recv-1', richValue(), 'to-binding');
  await official.send('ic-recv-1', portableValue(), 'to-binding', undefined, { serializationType: 'portable' });
  assert.deepEqual(await handle.getResult(), { messages: [richValue(), portableDecoded()], kinds: [true, true, true, true] });
  assert.deepEqual(await recvTags('ic-recv-1'), ['js_superjson', 'portable_json']);
  // The official client decodes the recorded receives as its own.
  const steps = await official.listWorkflowSteps('ic-recv-1');
  assert.deepEqual(
    steps?.filter((s) => s.name === 'DBOS.recv').map((s) => s.output),
    [richValue(), portableDecoded()],
  );
});

test("the official DBOSClient reads a binding workflow's events and stream", async () => {
  const handle = await DBOS.startWorkflow(publisher, { workflowID: 'ic-pub-1' })(null);
  assert.equal(await handle.getResult(), 'published');
  await assertPublished('ic-pub-1');
  assert.deepEqual(await official.getEvent('ic-pub-1', 'rich', WAIT), richValue());
  assert.deepEqual(await official.getEvent('ic-pub-1', 'portable', WAIT), portableDecoded());
  assert.deepEqual(await collect(official.readStream('ic-pub-1', 'values')), [richValue(), portableDecoded()]);
  assert.deepEqual(await official.readStreamOffset('ic-pub-1', 'values', 1), portableDecoded());
});

test('an official workflow receives what a binding workflow sends and reads its events and stream', async () => {
  const reader = officialProgram('reader', 'ic-official-reader', 'ic-pub-2');
  await reader.waitForEvent((e) => e.event === 'started');
  const handle = await DBOS.startWorkflow(publisher, { workflowID: 'ic-pub-2' })('ic-official-reader');
  assert.equal(await handle.getResult(), 'published');
  await assertPublished('ic-pub-2');
  // The official workflow decoded the superjson values to their kinds (messages, events, stream: rich ones first).
  const finished = await reader.waitForEvent((e) => e.event === 'finished');
  assert.deepEqual(finished.kinds, [
    [true, true, true, true],
    [false, false, false, false],
    [true, true, true, true],
    [false, false, false, false],
    [true, true, true, true],
    [false, false, false, false],
  ]);
  await reader.done();
  const result = await official.retrieveWorkflow('ic-official-reader').getResult();
  assert.deepEqual(result, {
    messages: [richValue(), portableDecoded()],
    events: [richValue(), portableDecoded()],
    stream: [richValue(), portableDecoded()],
  });
  assert.deepEqual(await recvTags('ic-official-reader'), ['js_superjson', 'portable_json']);
  const status = await official.getWorkflow('ic-official-reader');
  assert.equal(status?.executorId, 'official-comm-executor');
});

test("a binding workflow receives what an official workflow sends; the binding's DBOS, workflows and DBOSClient read its events and stream", async () => {
  const receiver = await DBOS.startWorkflow(twoMessages, { workflowID: 'ic-recv-2' })('to-binding');
  const writer = officialProgram('writer', 'ic-official-writer', 'ic-recv-2');
  await writer.waitForEvent((e) => e.event === 'started');
  assert.deepEqual(await receiver.getResult(), { messages: [richValue(), portableDecoded()], kinds: [true, true, true, true] });
  assert.deepEqual(await recvTags('ic-recv-2'), ['js_superjson', 'portable_json']);
  assert.deepEqual((await writer.waitForEvent((e) => e.event === 'finished')).result, 'written');
  await writer.done();
  await assertPublished('ic-official-writer');

  // Outside a workflow.
  assert.deepEqual(await DBOS.getEvent('ic-official-writer', 'rich', WAIT), richValue());
  assert.deepEqual(await DBOS.getEvent('ic-official-writer', 'portable', WAIT), portableDecoded());
  assert.deepEqual(await collect(DBOS.readStream('ic-official-writer', 'values')), [richValue(), portableDecoded()]);
  // From workflow code, recorded.
  const read = await DBOS.startWorkflow(peerReader, { workflowID: 'ic-peer-reader' })('ic-official-writer');
  assert.deepEqual(await read.getResult(), {
    events: [richValue(), portableDecoded()],
    stream: [richValue(), portableDecoded()],
    kinds: [
      [true, true, true, true],
      [true, true, true, true],
    ],
  });
  // The binding's client.
  const client = await DBOSClient.create(agent.config(APP));
  try {
    assert.deepEqual(await client.getEvent('ic-official-writer', 'rich', WAIT), richValue());
    assert.deepEqual(await client.getEvent('ic-official-writer', 'portable', WAIT), portableDecoded());
    assert.deepEqual(await collect(client.readStream('ic-official-writer', 'values')), [richValue(), portableDecoded()]);
    assert.deepEqual(await client.readStreamOffset('ic-official-writer', 'values', 0), richValue());
  } finally {
    await client.destroy();
  }
});

test('a Python-binding workflow and a Node-binding workflow exchange portable messages through one agent', async () => {
  const ping = { from: 'python', n: 3, pi: 3.5, text: 'héllo ✓', list: [1, 'two', null], nested: { ok: true } };
  const node = await DBOS.startWorkflow(ponger, { workflowID: 'ic-node-ponger' })('ic-py-pinger');
  const env: Record<string, string> = {
    DBOS_AGENT_SOCKET: agent.socket,
    PY_WORKFLOW_ID: 'ic-py-pinger',
    NODE_WORKFLOW_ID: 'ic-node-ponger',
    PY_PING: JSON.stringify(ping),
    PYTHONUNBUFFERED: '1',
  };
  if (TRANSPORT === 'library') Object.assign(env, { DBOS_AGENT_LIBRARY: LIBRARY, DBOS_AGENT_MODE: 'connect' });
  const py = new Proc(join(REPO, '.venv', 'bin', 'python'), [join(__dirname, '..', '..', 'test', 'apps', 'py_comm.py')], env);
  procs.push(py);
  // Python's tuple arrives as a list.
  const sent = { ...ping, pair: ['a', 1] };
  assert.deepEqual(await node.getResult(), sent);
  const expected = {
    reply: { got: sent, from: 'node', count: 3, half: 0.5, at: '2026-07-08T09:10:11.012Z', none: null },
    kinds: { got: 'dict', from: 'str', count: 'int', half: 'float', at: 'str', none: 'NoneType' },
  };
  assert.deepEqual((await py.waitForEvent((e) => e.event === 'result')).result, expected);
  await py.done();
  // The Python workflow is portable: its inputs and result are read here too.
  assert.deepEqual(await DBOS.retrieveWorkflow('ic-py-pinger').getResult(), expected);
  const status = await DBOS.getWorkflowStatus('ic-py-pinger');
  assert.deepEqual(status?.input, ['ic-node-ponger', ping]);
  assert.deepEqual(await recvTags('ic-node-ponger'), ['portable_json']);
  assert.deepEqual(await recvTags('ic-py-pinger'), ['portable_json']);
});
