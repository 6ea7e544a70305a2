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

/** A workflow's status row, its output and error read as DBOS TS reads them (workflow_output first). */
export async function statusRow(url: string, workflowID: string): Promise<Record<string, unknown> | undefined> {
  const rows = await query(
    url,
    `SELECT ws.*, COALESCE(wo.output, ws.output) AS output, COALESCE(wo.error, ws.error) AS error
       FROM dbos.workflow_status ws LEFT JOIN dbos.workflow_output wo ON wo.workflow_uuid = ws.workflow_uuid
      WHERE ws.workflow_uuid = $1`,
    [workflowID],
  );
  return rows[0];
}
