/**
 * A data source written the way DBOS TypeScript 5.3 asks one to be, on
 * `pg`, against `dbos-agent/datasource` alone: its transaction checks for
 * its own checkpoint (replaying it), runs the function, inserts the
 * checkpoint in the same transaction (a concurrent run's insert of the same
 * step makes it DBOSStepAlreadyRecordedError and a replay), checks that the
 * run still owns the workflow, and commits; it deletes checkpoints when
 * asked. It notes what DBOS asked of it, for the tests to check, and can be
 * made to stop dead right after a commit (`crashAfterCommit`), as a process
 * killed between its commit and the step's record would.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Pool, PoolClient } from 'pg';
import superjson from 'superjson';
import { DBOS } from '../../src';
import {
  DBOSDataSource,
  DBOSStepAlreadyRecordedError,
  DataSourceTransactionHandler,
  PGTransactionConfig,
  assertStillOwnsWorkflow,
  guardDataSourcePoolPG,
  isPGKeyConflictError,
  migrateDataSourcePG,
  registerDataSource,
  registerTransaction,
  replayRecordedStep,
  runTransaction,
} from '../../src/datasource';
import type { FunctionName } from '../../src';

export interface PgTransactionConfig extends PGTransactionConfig {
  name?: string;
}

const current = new AsyncLocalStorage<PoolClient>();

class PgHandler implements DataSourceTransactionHandler {
  pool?: Pool;
  readonly deletes: Array<[string, number]> = [];
  crashAfterCommit?: () => Promise<void>;
  /** Called in each transaction after the user's function and the checkpoint insert, before the commit. */
  beforeCommit?: (workflowID: string | undefined) => Promise<void>;

  constructor(
    readonly name: string,
    private readonly url: string,
  ) {}

  async initialize(): Promise<void> {
    this.pool = new Pool({ connectionString: this.url, max: 4 });
    guardDataSourcePoolPG(this.pool, 'PgDataSource');
    await this.inTransaction(async (client) => {
      await migrateDataSourcePG(async (sql) => (await client.query(sql)).rows);
    });
  }

  /** fn in a transaction of a pooled connection, committed when it returns, rolled back when it throws. */
  private async inTransaction(fn: (client: PoolClient) => Promise<void>): Promise<void> {
    const client = await this.pool!.connect();
    try {
      await client.query('BEGIN');
      await fn(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  }

  async destroy(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end();
  }

  async deleteCheckpoints(workflowID: string, startStep: number, beforeCommit?: () => Promise<void>): Promise<void> {
    this.deletes.push([workflowID, startStep]);
    await this.inTransaction(async (client) => {
      await client.query('DELETE FROM dbos.transaction_completion WHERE workflow_id = $1 AND function_num >= $2', [workflowID, startStep]);
      await beforeCommit?.();
    });
  }

  private async recorded(workflowID: string, stepID: number): Promise<{ output: string | null; error: string | null } | undefined> {
    const r = await this.pool!.query('SELECT output, error FROM dbos.transaction_completion WHERE workflow_id = $1 AND function_num = $2', [workflowID, stepID]);
    return r.rows[0];
  }

  async invokeTransactionFunction<This, Args extends unknown[], Return>(
    config: unknown,
    target: This,
    func: (this: This, ...args: Args) => Promise<Return>,
    ...args: Args
  ): Promise<Return> {
    const cfg = (config ?? {}) as PgTransactionConfig;
    const workflowID = DBOS.workflowID;
    const stepID = DBOS.stepID!;
    const checkpointed = workflowID !== undefined && !cfg.readOnly;
    if (checkpointed) {
      const prior = await this.recorded(workflowID, stepID);
      if (prior) return replayRecordedStep<Return>(prior);
    }
    const client = await this.pool!.connect();
    try {
      const mode = [cfg.isolationLevel ? `ISOLATION LEVEL ${cfg.isolationLevel}` : '', cfg.readOnly ? 'READ ONLY' : ''].join(' ');
      await client.query(`BEGIN ${mode}`);
      let result: Return;
      try {
        result = await current.run(client, () => func.call(target, ...args));
        if (checkpointed) {
          try {
            await client.query('INSERT INTO dbos.transaction_completion (workflow_id, function_num, output) VALUES ($1, $2, $3)', [
              workflowID,
              stepID,
              superjson.stringify(result),
            ]);
          } catch (err) {
            if (isPGKeyConflictError(err)) throw new DBOSStepAlreadyRecordedError(workflowID, stepID);
            throw err;
          }
          await assertStillOwnsWorkflow(workflowID);
        }
        await this.beforeCommit?.(workflowID);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        if (err instanceof DBOSStepAlreadyRecordedError) {
          const prior = await this.recorded(workflowID!, stepID);
          if (prior) return replayRecordedStep<Return>(prior);
        }
        throw err;
      }
      if (this.crashAfterCommit) await this.crashAfterCommit();
      return result;
    } finally {
      client.release();
    }
  }
}

/** The application's face of the data source: its transactions, and the client of the one running now. */
export class PgDataSource implements DBOSDataSource<PgTransactionConfig> {
  readonly handler: PgHandler;

  constructor(
    readonly name: string,
    url: string,
  ) {
    this.handler = new PgHandler(name, url);
    registerDataSource(this.handler);
  }

  static get client(): PoolClient {
    const c = current.getStore();
    if (!c || !DBOS.isInTransaction()) throw new Error('PgDataSource.client is only for use in a transaction');
    return c;
  }

  runTransaction<T>(callback: () => Promise<T>, config?: PgTransactionConfig): Promise<T> {
    return runTransaction(callback, config?.name ?? callback.name, { dsName: this.name, config });
  }

  registerTransaction<This, Args extends unknown[], Return>(
    func: (this: This, ...args: Args) => Promise<Return>,
    config?: PgTransactionConfig & FunctionName,
  ): (this: This, ...args: Args) => Promise<Return> {
    return registerTransaction(this.name, func, config);
  }

  transaction(config?: PgTransactionConfig) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const ds = this;
    return function <This, Args extends unknown[], Return>(
      target: object,
      propertyKey: string,
      descriptor: TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>>,
    ): TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>> {
      descriptor.value = ds.registerTransaction(descriptor.value!, { ...config, name: config?.name ?? propertyKey, ctorOrProto: target });
      return descriptor;
    };
  }
}
