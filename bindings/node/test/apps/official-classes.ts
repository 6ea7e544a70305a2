// The official DBOS TypeScript SDK running test/apps/class-shapes.ts on its
// own system database (it needs no agent), for the rows it writes.
import { report } from './proc';
import { defineShapes, runShapes } from './class-shapes';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const official = require('@dbos-inc/dbos-sdk') as typeof import('@dbos-inc/dbos-sdk');
const shapes = defineShapes(official.DBOS, official.ConfiguredInstance);

async function main(): Promise<void> {
  official.DBOS.setConfig({ name: 'classes-app', systemDatabaseUrl: process.env.OFFICIAL_DATABASE_URL! });
  await official.DBOS.launch();
  const results = await runShapes(official.DBOS, shapes, 'shape');
  report('results', { results });
  await official.DBOS.shutdown();
}

// node --test runs every file of build/test: only a test's spawn starts this worker.
if (process.env.OFFICIAL_DATABASE_URL) main().catch((e) => {
  console.error(e);
  process.exit(1);
});
