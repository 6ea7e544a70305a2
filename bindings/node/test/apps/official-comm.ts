/**
 * The official DBOS TypeScript SDK running a workflow on the system database
 * of interop_comm.test.ts's agent, beside the binding's worker: its own
 * application, version and executor, so neither takes the other's work.
 * OFFICIAL_COMM_MODE `reader` runs a workflow that receives two messages and
 * reads the events and stream of the binding's workflow OFFICIAL_COMM_PEER_ID;
 * `writer` runs one that sets events, writes a stream and sends two messages
 * to it. Both in DBOS's default format and in portable JSON; besides, a
 * message on no topic and a stream ('open') never closed. Reports
 * `started` once its workflow exists and `finished` with what the workflow
 * decoded (its kinds; its result the test reads with DBOSClient).
 */
import { report } from './proc';
import { portableValue, richKinds, richValue } from './comm-values';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { DBOS } = require('@dbos-inc/dbos-sdk') as typeof import('@dbos-inc/dbos-sdk');

const WAIT = 30;

const officialReader = DBOS.registerWorkflow(
  async (peer: string) => {
    const rich = await DBOS.recv<unknown>('to-official', WAIT);
    const portable = await DBOS.recv<unknown>('to-official', WAIT);
    const untopiced = await DBOS.recv<unknown>(undefined, WAIT);
    const events = [await DBOS.getEvent<unknown>(peer, 'rich', WAIT), await DBOS.getEvent<unknown>(peer, 'portable', WAIT)];
    const stream: unknown[] = [];
    for await (const v of DBOS.readStream<unknown>(peer, 'values')) stream.push(v);
    // Never closed: it ends when its workflow does.
    const open: unknown[] = [];
    for await (const v of DBOS.readStream<unknown>(peer, 'open')) open.push(v);
    return { messages: [rich, portable, untopiced], events, stream, open };
  },
  { name: 'officialReader' },
);

const officialWriter = DBOS.registerWorkflow(
  async (peer: string) => {
    await DBOS.setEvent('rich', richValue());
    await DBOS.setEvent('portable', portableValue(), { serializationType: 'portable' });
    await DBOS.writeStream('values', richValue());
    await DBOS.writeStream('values', portableValue(), { serializationType: 'portable' });
    await DBOS.closeStream('values');
    await DBOS.writeStream('open', 'left open');
    await DBOS.send(peer, richValue(), 'to-binding');
    await DBOS.send(peer, portableValue(), 'to-binding', undefined, { serializationType: 'portable' });
    await DBOS.send(peer, 'no topic');
    return 'written';
  },
  { name: 'officialWriter' },
);

async function main(mode: string): Promise<void> {
  DBOS.setConfig({
    name: 'official-comm-app',
    systemDatabaseUrl: process.env.OFFICIAL_COMM_DATABASE_URL!,
    executorID: 'official-comm-executor',
    applicationVersion: 'official-comm-v1',
  });
  await DBOS.launch();
  const workflowID = process.env.OFFICIAL_COMM_WORKFLOW_ID!;
  const peer = process.env.OFFICIAL_COMM_PEER_ID!;
  if (mode === 'reader') {
    const handle = await DBOS.startWorkflow(officialReader, { workflowID })(peer);
    report('started', { workflowID });
    const result = await handle.getResult();
    report('finished', { kinds: [...result.messages.slice(0, 2), ...result.events, ...result.stream].map((v) => richKinds(v)) });
  } else {
    const handle = await DBOS.startWorkflow(officialWriter, { workflowID })(peer);
    report('started', { workflowID });
    report('finished', { result: await handle.getResult() });
  }
  await DBOS.shutdown();
}

// Only interop_comm.test.ts's spawn starts this program.
const mode = process.env.OFFICIAL_COMM_MODE;
if (mode) {
  main(mode).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
