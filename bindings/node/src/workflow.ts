/**
 * Workflow handles: a started workflow's id, its status and its outcome.
 * From workflow code, awaiting is durable (step `DBOS.getResult`) and so is
 * reading the status (step `getStatus`), as in DBOS TypeScript.
 */
import type { Engine, LocalOutcome } from './runtime';
import type { PollingOptions, WorkflowHandle, WorkflowStatus } from './types';

export class AgentWorkflowHandle<R> implements WorkflowHandle<R> {
  constructor(
    private readonly engine: () => Engine,
    readonly workflowID: string,
    /** The run this process executes for the handle's start (DBOS TS's InvokedHandle), if any. */
    private readonly invoked?: Promise<LocalOutcome>,
  ) {}

  async getStatus(): Promise<WorkflowStatus | null> {
    const engine = this.engine();
    if (engine.currentRun()) {
      const json = await engine.runStep(
        async () => {
          const status = await engine.getStatus(this.workflowID);
          return status === null ? null : JSON.stringify(status);
        },
        'getStatus',
        {},
      );
      return json === null ? null : (JSON.parse(json) as WorkflowStatus);
    }
    return engine.getStatus(this.workflowID);
  }

  /**
   * The workflow's outcome: its value, or its error thrown. (DBOS's polling
   * interval has no use here: the agent wakes waiters when outcomes land.)
   */
  getResult(options?: PollingOptions | number): Promise<R> {
    return this.engine().durableResult<R>(this.workflowID, typeof options === 'number' ? options : undefined, this.invoked);
  }
}
