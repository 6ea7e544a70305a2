// What the core's tests read straight from the system database (the rows DBOS
// TypeScript would read), with pg.
import { Client } from 'pg';

export async function query<T = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new Client(url);
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

export interface StepRow {
  function_id: number;
  function_name: string;
  output: string | null;
  error: string | null;
  child_workflow_id: string | null;
}

/** A workflow's recorded steps, by function id. */
export function stepRows(url: string, workflowID: string): Promise<StepRow[]> {
  return query<StepRow>(
    url,
    'SELECT function_id, function_name, output, error, child_workflow_id FROM dbos.operation_outputs WHERE workflow_uuid = $1 ORDER BY function_id',
    [workflowID],
  );
}

/** A workflow's status row. */
export async function statusRow(url: string, workflowID: string): Promise<Record<string, unknown> | undefined> {
  return (await query(url, 'SELECT * FROM dbos.workflow_status WHERE workflow_uuid = $1', [workflowID]))[0];
}
