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
 * Node-binding workflow exchange portable messages, events and streams
 * through the same agent.
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

/** Receives two messages on topic, then one on no topic; says whether the first decoded to its rich kinds. */
const inbox = DBOS.registerWorkflow(
  async (topic: string) => {
    const first = await DBOS.recv<unknown>(topic, WAIT);
    const second = await DBOS.recv<unknown>(topic, WAIT);
    const untopiced = await DBOS.recv<unknown>(undefined, WAIT);
    return { messages: [first, second, untopiced], kinds: richKinds(first) };
  },
  { name: 'inbox' },
);

/**
 * Sets two events and writes a stream of two values (default, portable), and
 * a stream it never closes; then sends both values to destination, if any,
 * and a message on no topic.
 */
const publisher = DBOS.registerWorkflow(
  async (destination: string | null) => {
    await DBOS.setEvent('rich', richValue());
    await DBOS.setEvent('portable', portableValue(), { serializationType: 'portable' });
    await DBOS.writeStream('values', richValue());
    await DBOS.writeStream('values', portableValue(), { serializationType: 'portable' });
    await DBOS.closeStream('values');
    await DBOS.writeStream('open', 'left open');
    if (destination !== null) {
      await DBOS.send(destination, richValue(), 'to-official');
      await DBOS.send(destination, portableValue(), 'to-official', undefined, { serializationType: 'portable' });
      await DBOS.send(destination, 'no topic');
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
    const open = await collect(DBOS.readStream<unknown>(peer, 'open'));
    return { events, stream, open, kinds: [richKinds(events[0]), richKinds(stream[0])] };
  },
  { name: 'peerReader' },
);

/**
 * Answers the Python workflow pyID's ping in portable JSON, publishes an
 * event and a stream for it, then reads its event and stream; returns what it got.
 */
const ponger = DBOS.registerWorkflow(
  async (pyID: string) => {
    const ping = await DBOS.recv<Record<string, unknown>>('ping', WAIT);
    const reply = { got: ping, from: 'node', count: 3, half: 0.5, at: new Date('2026-07-08T09:10:11.012Z'), none: null };
    await DBOS.send(pyID, reply, 'pong', undefined, { serializationType: 'portable' });
    await DBOS.setEvent('node-event', { from: 'node', list: [1, 2] }, { serializationType: 'portable' });
    await DBOS.writeStream('node-stream', 'first', { serializationType: 'portable' });
    await DBOS.writeStream('node-stream', { second: 2 }, { serializationType: 'portable' });
    await DBOS.closeStream('node-stream');
    const event = await DBOS.getEvent<unknown>(pyID, 'py-event', WAIT);
    const stream = await collect(DBOS.readStream<unknown>(pyID, 'py-stream'));
    return { ping, event, stream };
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
  const handle = await DBOS.startWorkflow(inbox, { workflowID: 'ic-recv-1' })('to-binding');
  // The message on no topic goes first: the workflow takes it only after the other two.
  await official.send('ic-recv-1', 'no topic');
  await official.send('ic-recv-1', richValue(), 'to-binding');
  await official.send('ic-recv-1', portableValue(), 'to-binding', undefined, { serializationType: 'portable' });
  assert.deepEqual(await handle.getResult(), { messages: [richValue(), portableDecoded(), 'no topic'], kinds: [true, true, true, true] });
  assert.deepEqual(await recvTags('ic-recv-1'), ['js_superjson', 'portable_json', 'js_superjson']);
  // The official client decodes the recorded receives as its own.
  const steps = await official.listWorkflowSteps('ic-recv-1');
  assert.deepEqual(
    steps?.filter((s) => s.name === 'DBOS.recv').map((s) => s.output),
    [richValue(), portableDecoded(), 'no topic'],
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
  // A stream never closed ends with its workflow.
  assert.deepEqual(await collect(official.readStream('ic-pub-1', 'open')), ['left open']);
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
    messages: [richValue(), portableDecoded(), 'no topic'],
    events: [richValue(), portableDecoded()],
    stream: [richValue(), portableDecoded()],
    open: ['left open'],
  });
  assert.deepEqual(await recvTags('ic-official-reader'), ['js_superjson', 'portable_json', 'js_superjson']);
  const status = await official.getWorkflow('ic-official-reader');
  assert.equal(status?.executorId, 'official-comm-executor');
});

test("a binding workflow receives what an official workflow sends; the binding's DBOS, workflows and DBOSClient read its events and stream", async () => {
  const receiver = await DBOS.startWorkflow(inbox, { workflowID: 'ic-recv-2' })('to-binding');
  const writer = officialProgram('writer', 'ic-official-writer', 'ic-recv-2');
  await writer.waitForEvent((e) => e.event === 'started');
  assert.deepEqual(await receiver.getResult(), { messages: [richValue(), portableDecoded(), 'no topic'], kinds: [true, true, true, true] });
  assert.deepEqual(await recvTags('ic-recv-2'), ['js_superjson', 'portable_json', 'js_superjson']);
  assert.deepEqual((await writer.waitForEvent((e) => e.event === 'finished')).result, 'written');
  await writer.done();
  await assertPublished('ic-official-writer');

  // Outside a workflow.
  assert.deepEqual(await DBOS.getEvent('ic-official-writer', 'rich', WAIT), richValue());
  assert.deepEqual(await DBOS.getEvent('ic-official-writer', 'portable', WAIT), portableDecoded());
  assert.deepEqual(await collect(DBOS.readStream('ic-official-writer', 'values')), [richValue(), portableDecoded()]);
  assert.deepEqual(await collect(DBOS.readStream('ic-official-writer', 'open')), ['left open']);
  // From workflow code, recorded.
  const read = await DBOS.startWorkflow(peerReader, { workflowID: 'ic-peer-reader' })('ic-official-writer');
  assert.deepEqual(await read.getResult(), {
    events: [richValue(), portableDecoded()],
    stream: [richValue(), portableDecoded()],
    open: ['left open'],
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
    assert.deepEqual(await collect(client.readStream('ic-official-writer', 'open')), ['left open']);
  } finally {
    await client.destroy();
  }
});

test('a Python-binding workflow and a Node-binding workflow exchange portable messages, events and streams through one agent', async () => {
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
  assert.deepEqual(await node.getResult(), { ping: sent, event: { from: 'python', ok: true }, stream: [{ i: 1 }, [2.5, null, 'three']] });
  const expected = {
    reply: { got: sent, from: 'node', count: 3, half: 0.5, at: '2026-07-08T09:10:11.012Z', none: null },
    kinds: { got: 'dict', from: 'str', count: 'int', half: 'float', at: 'str', none: 'NoneType' },
    event: { from: 'node', list: [1, 2] },
    stream: ['first', { second: 2 }],
  };
  assert.deepEqual((await py.waitForEvent((e) => e.event === 'result')).result, expected);
  await py.done();
  // The Python workflow is portable: its inputs and result are read here too.
  assert.deepEqual(await DBOS.retrieveWorkflow('ic-py-pinger').getResult(), expected);
  const status = await DBOS.getWorkflowStatus('ic-py-pinger');
  assert.deepEqual(status?.input, ['ic-node-ponger', ping]);
  assert.deepEqual(await recvTags('ic-node-ponger'), ['portable_json']);
  assert.deepEqual(await recvTags('ic-py-pinger'), ['portable_json']);
  assert.deepEqual(await eventTags('ic-py-pinger'), { 'py-event': 'portable_json' });
  assert.deepEqual(await eventTags('ic-node-ponger'), { 'node-event': 'portable_json' });
  assert.deepEqual(
    (await query<{ serialization: string }>(agent.databaseUrl, `SELECT serialization FROM dbos.streams WHERE key = 'py-stream' ORDER BY "offset"`)).map(
      (r) => r.serialization,
    ),
    ['portable_json', 'portable_json', 'portable_json'],
  );
});
