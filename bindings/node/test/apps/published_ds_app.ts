/**
 * A DBOS TypeScript application on DBOS's published Postgres data source
 * (@dbos-inc/postgres-datasource 4.24), written against the official
 * packages: test/dropin.test.ts installs it with `@dbos-inc/dbos-sdk`
 * aliased to this binding, as `"@dbos-inc/dbos-sdk": "npm:dbos-agent@..."`
 * would, and runs it through the agent. (On DBOS TypeScript 5.3 itself the
 * data source's launch fails: it calls schema helpers 5.3 dropped.)
 *
 * Its databases: DBOS_SYSTEM_DATABASE_URL, and APP_DATABASE_URL with a table
 * `items (sku text, qty int)`.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { PostgresDataSource } from '@dbos-inc/postgres-datasource';

const app = new URL(process.env.APP_DATABASE_URL!);
const ds = new PostgresDataSource('shop-db', {
  host: app.hostname,
  port: Number(app.port),
  database: app.pathname.slice(1),
  username: decodeURIComponent(app.username),
  password: decodeURIComponent(app.password),
  onnotice: () => undefined,
});

class Shop {
  @ds.transaction()
  static async addItem(sku: string, qty: number): Promise<{ rows: number; inTransaction: boolean; stepID: number | undefined }> {
    await PostgresDataSource.client`INSERT INTO items (sku, qty) VALUES (${sku}, ${qty})`;
    const [row] = await PostgresDataSource.client`SELECT count(*)::int AS n FROM items`;
    return { rows: row.n as number, inTransaction: DBOS.isInTransaction(), stepID: DBOS.stepID };
  }

  @ds.transaction({ readOnly: true })
  static async stock(): Promise<number> {
    const [row] = await PostgresDataSource.client`SELECT coalesce(sum(qty), 0)::int AS total FROM items`;
    return row.total as number;
  }

  @DBOS.workflow()
  static async restock(items: Array<[string, number]>): Promise<{ added: number[]; stock: number; label: string }> {
    const added: number[] = [];
    for (const [sku, qty] of items) added.push((await Shop.addItem(sku, qty)).rows);
    const label = await ds.runTransaction(async () => `restocked ${items.length} in ${DBOS.workflowID}`, { name: 'label' });
    return { added, stock: await Shop.stock(), label };
  }
}

async function main(): Promise<void> {
  DBOS.setConfig({ name: 'published-datasource-app', systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, logLevel: 'warn' });
  await DBOS.launch();
  console.log(`outside a workflow: ${JSON.stringify(await Shop.addItem('seed', 1))}`);
  const first = await DBOS.startWorkflow(Shop, { workflowID: 'restock-1' }).restock([
    ['apple', 3],
    ['pear', 4],
  ]);
  console.log(`restock: ${JSON.stringify(await first.getResult())}`);
  for (const s of (await DBOS.listWorkflowSteps('restock-1')) ?? []) console.log(`  step ${s.functionID} ${s.name}: ${JSON.stringify(s.output)}`);
  const checkpoints = await ds.runTransaction(async () => {
    const rows = await PostgresDataSource.client`SELECT function_num FROM dbos.transaction_completion WHERE workflow_id = 'restock-1' ORDER BY function_num`;
    return rows.map((r) => r.function_num as number);
  });
  console.log(`checkpoints: ${JSON.stringify(checkpoints)}`);
  // The same workflow id again: its recorded result, and nothing added.
  const again = await DBOS.startWorkflow(Shop, { workflowID: 'restock-1' }).restock([['plum', 9]]);
  console.log(`again: ${JSON.stringify(await again.getResult())}`);
  console.log(`stock: ${await Shop.stock()}`);
  await DBOS.shutdown();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
