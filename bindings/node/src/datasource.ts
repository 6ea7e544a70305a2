/**
 * `dbos-agent/datasource`: DBOS TypeScript's data source API
 * (`@dbos-inc/dbos-sdk/datasource`), for transactions on the application's
 * own database.
 *
 * A data source (a `DataSourceTransactionHandler`: DBOS's Postgres, Knex,
 * Drizzle or Prisma packages, or one the application writes) runs the user's
 * function in a transaction of its database, in this process, and commits
 * its checkpoint (`transaction_completion`, keyed by workflow id and step id)
 * in that same transaction. DBOS then records the step in the system
 * database through the agent like any step: a replay takes that record
 * first; a transaction that committed but whose step record was lost (the
 * process died between the two) finds its own checkpoint and is not run
 * again. Before committing, a handler may check that its run still owns the
 * workflow (`assertStillOwnsWorkflow`, asked of the agent); when the workflow
 * ends, the checkpoints of the data sources its run used are deleted (the
 * step records cover them), and a rewind deletes them from its step on.
 *
 * The helpers that DBOS's published data source packages (4.x, and Prisma's
 * 5.1) call and DBOS TypeScript 5.3 no longer has (`checkSchemaInstallationPG`,
 * `createTransactionCompletionSchemaPG`, `createTransactionCompletionTablePG`)
 * are here too, so those packages run on this binding.
 */
import { createHash } from 'node:crypto';
import superjson from 'superjson';
import { currentContext, runWithChanges } from './context';
import { DBOS, maybeEngine, requireEngine } from './dbos';
import {
  DBOSConflictingRegistrationError,
  DBOSError,
  DBOSInitializationError,
  DBOSInvalidWorkflowTransitionError,
  DBOSNotRegisteredError,
  DBOSWorkflowConflictError,
} from './error';
import { bindWrapper, FunctionRegistration } from './registry';
import type { FunctionName } from './types';

export { DBOSError, DBOSWorkflowConflictError };

/** What DBOS asks of a data source: set-up, tear-down, running a function in a transaction, and (optionally) deleting its checkpoints. */
export interface DataSourceTransactionHandler {
  readonly name: string;
  initialize(): Promise<void>;
  destroy(): Promise<void>;
  /** Deletes the workflow's checkpoints from startStep on; beforeCommit, when given, runs in the deleting transaction and may throw to roll it back. */
  deleteCheckpoints?(workflowID: string, startStep: number, beforeCommit?: () => Promise<void>): Promise<void>;
  invokeTransactionFunction<This, Args extends unknown[], Return>(
    config: unknown,
    target: This,
    func: (this: This, ...args: Args) => Promise<Return>,
    ...args: Args
  ): Promise<Return>;
}

/** The face a data source shows the application. */
export interface DBOSDataSource<Config extends { name?: string }> {
  readonly name: string;
  runTransaction<T>(callback: () => Promise<T>, config?: Config): Promise<T>;
  registerTransaction<This, Args extends unknown[], Return>(
    func: (this: This, ...args: Args) => Promise<Return>,
    config?: Config & FunctionName,
  ): (this: This, ...args: Args) => Promise<Return>;
  transaction(
    config?: Config,
  ): <This, Args extends unknown[], Return>(
    target: object,
    propertyKey: string,
    descriptor: TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>>,
  ) => TypedPropertyDescriptor<(this: This, ...args: Args) => Promise<Return>>;
}

// ---- the registry of data sources -------------------------------------------

const dataSources = new Map<string, DataSourceTransactionHandler>();
/** Initializations of data sources registered after launch, which their first transaction awaits. */
const lateInitializations = new Map<DataSourceTransactionHandler, Promise<void>>();

/**
 * Registers a data source under its name. Before launch, DBOS.launch
 * initializes it; after launch (DBOS TypeScript refuses this; the binding
 * takes declarations at any time), it is initialized at once and its first
 * transaction waits for that.
 */
export function registerDataSource(ds: DataSourceTransactionHandler): void {
  const existing = dataSources.get(ds.name);
  if (existing) {
    if (existing !== ds) throw new DBOSConflictingRegistrationError(`Data source with name ${ds.name} is already registered`);
    return;
  }
  dataSources.set(ds.name, ds);
  if (maybeEngine()) {
    const init = ds.initialize();
    // Observed here so that a failure is not unhandled; the first transaction rethrows it.
    init.catch(() => undefined);
    lateInitializations.set(ds, init);
  }
}

/** The data sources, for DBOS.launch (initialize) and DBOS.shutdown (destroy). */
export function registeredDataSources(): DataSourceTransactionHandler[] {
  return [...dataSources.values()];
}

/** Forgets every data source (DBOS.clearRegistry). */
export function clearDataSources(): void {
  dataSources.clear();
  lateInitializations.clear();
}

async function dataSourceNamed(name: string): Promise<DataSourceTransactionHandler> {
  const ds = dataSources.get(name);
  if (!ds) throw new DBOSNotRegisteredError(name, `Data source '${name}' is not registered`);
  const init = lateInitializations.get(ds);
  if (init) await init;
  return ds;
}

// ---- transactions ------------------------------------------------------------

/**
 * Runs callback as a transaction of the data source dsName (called by data
 * sources). In workflow code it is a step at the next step id, recorded
 * through the agent and replayed from the history; outside a workflow, a
 * plain transaction.
 */
export async function runTransaction<T>(callback: () => Promise<T>, funcName: string, options: { dsName: string; config?: unknown }): Promise<T> {
  const engine = requireEngine('transactions');
  const ds = await dataSourceNamed(options.dsName);
  const ctx = currentContext();
  if (!ctx?.run) return inTransaction(0, () => ds.invokeTransactionFunction(options.config ?? {}, undefined, callback));
  if (ctx.stepFunctionId !== undefined) {
    throw new DBOSInvalidWorkflowTransitionError(`Invalid call to \`${funcName}\` inside a \`step\` or \`transaction\``);
  }
  return engine.runTransaction(ds, funcName, () => ds.invokeTransactionFunction(options.config ?? {}, undefined, callback));
}

/** A data source's function registered as a transaction: called in workflow code it is a step; outside, a plain transaction. */
export function registerTransaction<This, Args extends unknown[], Return, Config extends FunctionName>(
  dsName: string,
  func: (this: This, ...args: Args) => Promise<Return>,
  config?: Config,
): (this: This, ...args: Args) => Promise<Return> {
  const name = config?.name ?? func.name;
  const owner = config?.ctorOrProto;
  const isStatic = typeof owner === 'function';
  const ctor = (isStatic ? owner : (owner as { constructor?: unknown } | undefined)?.constructor) as (new (...a: never[]) => unknown) | undefined;
  const reg = new FunctionRegistration(name, func as (...a: unknown[]) => unknown, ctor, owner !== undefined && !isStatic, config?.className);
  const invoker = async function (this: This, ...args: Args): Promise<Return> {
    const engine = requireEngine('transactions');
    const ds = await dataSourceNamed(dsName);
    const call = () => ds.invokeTransactionFunction(config, this, func, ...args);
    const ctx = currentContext();
    if (!ctx?.run) return inTransaction(0, call);
    if (ctx.stepFunctionId !== undefined) {
      throw new DBOSInvalidWorkflowTransitionError('Invalid call to a `transaction` function from within a `step` or `transaction`');
    }
    return engine.runTransaction(ds, name, call);
  };
  bindWrapper(invoker as (...a: unknown[]) => unknown, reg);
  return invoker;
}

/** A transaction outside any workflow: DBOS.isInTransaction() holds and DBOS.stepID is 0, as in DBOS TypeScript. */
function inTransaction<R>(stepID: number, fn: () => Promise<R>): Promise<R> {
  return runWithChanges({ stepFunctionId: stepID, inTransaction: true, stepStatus: undefined }, fn);
}

/**
 * Throws DBOSWorkflowConflictError when the calling run no longer owns
 * workflowID. A data source calls it in its transaction after inserting the
 * step's checkpoint (whose row makes a later owner's insert wait for this
 * commit), so that a stale run rolls back rather than applying a step the
 * new owner also runs. Outside that workflow's own run, there is nothing to
 * check.
 */
export async function assertStillOwnsWorkflow(workflowID: string): Promise<void> {
  const run = currentContext()?.run;
  if (!run || run.workflowID !== workflowID) return;
  if (!(await requireEngine('transactions').ownsWorkflow(workflowID, run.ownerXid))) throw new DBOSWorkflowConflictError(workflowID);
}

/**
 * Thrown by a data source's checkpoint insert when a concurrent run recorded
 * the step first: the transaction rolls back and the recorded outcome is
 * replayed (replayRecordedStep); it never reaches user code.
 */
export class DBOSStepAlreadyRecordedError extends Error {
  constructor(workflowID: string, stepID: number) {
    super(`Step ${stepID} of workflow ${workflowID} was already recorded by a concurrent execution`);
    this.name = 'DBOSStepAlreadyRecordedError';
  }
}

/** The outcome a data source recorded (superjson text, as its checkpoints hold): the value, or the error thrown. */
export function replayRecordedStep<Return>(recorded: { output?: string | null; error?: string | null }): Return {
  maybeEngine()?.tracer.activeSpan()?.setAttribute('cached', true);
  // A row carries both columns, the unused one null: the error column decides.
  if (typeof recorded.error === 'string') throw superjson.parse(recorded.error);
  return (recorded.output ? superjson.parse(recorded.output) : null) as Return;
}

// ---- Postgres helpers ----------------------------------------------------------

export const PGIsolationLevel = Object.freeze({
  ReadUncommitted: 'READ UNCOMMITTED',
  ReadCommitted: 'READ COMMITTED',
  RepeatableRead: 'REPEATABLE READ',
  Serializable: 'SERIALIZABLE',
} as const);
export type PGIsolationLevel = (typeof PGIsolationLevel)[keyof typeof PGIsolationLevel];

export interface PGTransactionConfig {
  isolationLevel?: PGIsolationLevel;
  readOnly?: boolean;
}

/** The table that records the data source schema's version (apart from the system database's dbos_migrations: the two may share a schema). */
export const DATASOURCE_MIGRATIONS_TABLE = 'dbos_transaction_completion_migrations';

export interface DataSourceMigrationOptions {
  runMigrations?: boolean;
}

/** Runs one SQL statement, in the migrating transaction, and gives its rows. */
export type DataSourceSQLExecutor = (sql: string) => Promise<ReadonlyArray<Record<string, unknown>>>;

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** The checkpoint table's DDL (created if missing). */
export function createTransactionCompletionTablePG(schemaName = 'dbos'): string {
  return `
  CREATE TABLE IF NOT EXISTS ${quoteIdent(schemaName)}.transaction_completion (
    workflow_id TEXT NOT NULL,
    function_num INT4 NOT NULL,
    output TEXT,
    error TEXT,
    created_at BIGINT NOT NULL DEFAULT (EXTRACT(EPOCH FROM now())*1000)::bigint,
    PRIMARY KEY (workflow_id, function_num)
  );
`;
}

/** The schema's DDL (created if missing): what DBOS's 4.x data sources run before the table's. */
export function createTransactionCompletionSchemaPG(schemaName = 'dbos'): string {
  return `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schemaName)};`;
}

/** A query of one row: whether the schema (`schema_exists`) and its checkpoint table (`table_exists`) exist. */
export function checkSchemaInstallationPG(schemaName = 'dbos'): string {
  return (
    `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${quoteLiteral(schemaName)}) AS schema_exists, ` +
    `EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = ${quoteLiteral(schemaName)} AND tablename = 'transaction_completion') AS table_exists`
  );
}

/** The data source schema's migrations, in order: migration N brings it to version N. */
export function getDataSourceMigrationsPG(schemaName = 'dbos'): string[] {
  // Version 1 creates IF NOT EXISTS, so a schema made before versioning adopts it.
  return [createTransactionCompletionTablePG(schemaName)];
}

async function tableExists(exec: DataSourceSQLExecutor, schemaName: string, table: string): Promise<boolean> {
  // pg_catalog: information_schema hides tables the role has no grant on.
  const rows = await exec(`SELECT 1 AS present FROM pg_catalog.pg_tables WHERE schemaname = ${quoteLiteral(schemaName)} AND tablename = ${quoteLiteral(table)}`);
  return rows.length > 0;
}

async function schemaVersion(exec: DataSourceSQLExecutor, schemaName: string): Promise<number> {
  if (!(await tableExists(exec, schemaName, DATASOURCE_MIGRATIONS_TABLE))) return 0;
  const rows = await exec(`SELECT version FROM ${quoteIdent(schemaName)}.${DATASOURCE_MIGRATIONS_TABLE}`);
  return rows.length > 0 ? Number(rows[0].version) : 0;
}

/** The key DBOS takes a transaction-scoped advisory lock on: the first 8 bytes of the name's SHA-256, signed big-endian. */
function advisoryLockKey(lockName: string): bigint {
  return createHash('sha256').update(lockName).digest().readBigInt64BE(0);
}

/**
 * Brings the data source schema to the latest version. exec must run every
 * statement in one transaction: the advisory lock then serializes
 * concurrent migrators (DBOS TypeScript's among them: same lock key) until
 * it commits. A schema at or past the latest version gets no DDL.
 */
export async function migrateDataSourcePG(exec: DataSourceSQLExecutor, schemaName = 'dbos'): Promise<void> {
  const migrations = getDataSourceMigrationsPG(schemaName);
  const latest = migrations.length;
  if ((await schemaVersion(exec, schemaName)) >= latest) return;
  // A migrator that freezes holding the lock is killed by the server, releasing it.
  await exec(`SET LOCAL idle_in_transaction_session_timeout = '30s'`);
  const server = (await exec('SELECT version() AS version'))[0]?.version;
  // CockroachDB has no pg_advisory_xact_lock: it migrates unserialized, as with DBOS.
  if (!(typeof server === 'string' && /cockroachdb/i.test(server))) {
    await exec(`SELECT 1 AS locked FROM pg_advisory_xact_lock(${advisoryLockKey(`dbos.datasource_migrations.${schemaName}`)})`);
  }
  const current = await schemaVersion(exec, schemaName);
  if (current >= latest) return;
  const schema = quoteIdent(schemaName);
  const table = `${schema}.${DATASOURCE_MIGRATIONS_TABLE}`;
  // Checked first: CREATE SCHEMA IF NOT EXISTS still needs the CREATE privilege.
  if ((await exec(`SELECT 1 AS present FROM pg_catalog.pg_namespace WHERE nspname = ${quoteLiteral(schemaName)}`)).length === 0) {
    await exec(`CREATE SCHEMA ${schema}`);
  }
  if (!(await tableExists(exec, schemaName, DATASOURCE_MIGRATIONS_TABLE))) {
    await exec(`CREATE TABLE ${table} (version BIGINT NOT NULL PRIMARY KEY)`);
  }
  for (let v = current + 1; v <= latest; v++) await exec(migrations[v - 1]);
  await exec(current === 0 ? `INSERT INTO ${table} (version) VALUES (${latest})` : `UPDATE ${table} SET version = ${latest}`);
}

/** Throws unless the data source schema is migrated; creates and changes nothing. */
export async function verifyDataSourcePG(exec: DataSourceSQLExecutor, schemaName = 'dbos', dataSourceName?: string): Promise<void> {
  const current = await schemaVersion(exec, schemaName);
  const latest = getDataSourceMigrationsPG(schemaName).length;
  // A schema ahead of this build is a newer peer's, which migration tolerates too.
  if (current < latest) {
    const which = dataSourceName ? `Data source '${dataSourceName}'` : 'Data source';
    throw new DBOSInitializationError(
      `${which} schema '${schemaName}' is at transaction schema version ${current}, but this version of DBOS requires ${latest}. ` +
        `This data source is configured with runMigrations disabled, so it will not migrate it: either migrate it out of band ` +
        `(the data source's static \`initializeDBOSSchema\`) or enable runMigrations.`,
    );
  }
}

/** The grants a data source needs at run time: read the version, read and write checkpoints. */
export function getDataSourcePermissionsSQL(schemaName: string, roleName: string): string[] {
  const schema = quoteIdent(schemaName);
  const role = quoteIdent(roleName);
  return [
    `GRANT USAGE ON SCHEMA ${schema} TO ${role}`,
    `GRANT SELECT, INSERT, DELETE ON ${schema}.transaction_completion TO ${role}`,
    `GRANT SELECT ON ${schema}.${DATASOURCE_MIGRATIONS_TABLE} TO ${role}`,
  ];
}

/** Migrates the data source schema (in exec's one transaction), then grants applicationRole what it needs at run time. */
export async function initializeDataSourceSchemaPG(exec: DataSourceSQLExecutor, schemaName = 'dbos', applicationRole?: string): Promise<void> {
  await migrateDataSourcePG(exec, schemaName);
  if (applicationRole) for (const stmt of getDataSourcePermissionsSQL(schemaName, applicationRole)) await exec(stmt);
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** The SQLSTATE of a driver's error, following the cause chain of the errors that wrap it. */
function sqlState(error: unknown): string | undefined {
  let e = error;
  for (let depth = 0; e && typeof e === 'object' && depth < 10; depth++) {
    // Only a SQLSTATE ends the search, so a wrapper's own code does not hide the driver's.
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && SQLSTATE.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A serialization failure (40001): the transaction may be retried. */
export function isPGRetriableTransactionError(error: unknown): boolean {
  return sqlState(error) === '40001';
}

/** A unique violation (23505): for a checkpoint insert, another run recorded the step. */
export function isPGKeyConflictError(error: unknown): boolean {
  return sqlState(error) === '23505';
}

/** A connection of a pool as guardDataSourcePoolPG uses it (a `pg` PoolClient is one). */
export interface GuardedPoolClient {
  on(event: 'error', listener: (err: Error) => void): unknown;
  removeListener(event: 'error', listener: (err: Error) => void): unknown;
}

/** A pool as guardDataSourcePoolPG uses it (a `pg` Pool is one); typed here so the package needs no `pg` types. */
export interface GuardedPool {
  on(event: 'error', listener: (err: Error, client: GuardedPoolClient) => void): unknown;
  on(event: 'acquire', listener: (client: GuardedPoolClient) => void): unknown;
  on(event: 'release', listener: (err: Error, client: GuardedPoolClient) => void): unknown;
}

/** Logs, rather than crashes on, the errors of a pool's idle and checked-out connections. */
export function guardDataSourcePoolPG(pool: GuardedPool, dataSourceType: string): void {
  const warn = (where: string, err: Error): void => {
    const code = (err as { code?: unknown }).code;
    DBOS.logger.warn(`Unexpected error ${where}${typeof code === 'string' ? ` (${code})` : ''}: ${err.stack ?? err.message}`);
  };
  const onClientError = (err: Error): void => warn(`on a ${dataSourceType} connection`, err);
  pool.on('error', (err) => warn(`in ${dataSourceType} pool`, err));
  pool.on('acquire', (client) => client.on('error', onClientError));
  pool.on('release', (_err, client) => client.removeListener('error', onClientError));
}
