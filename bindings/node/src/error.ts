// TEMPORARY (not committed): minimal stand-ins until the serde branch lands.
export class DBOSError extends Error { constructor(msg: string, public dbosErrorCode = 1) { super(msg); this.name = this.constructor.name; } }
export class DBOSAgentUnavailableError extends DBOSError { constructor(msg: string, cause?: unknown) { super(msg, 100); this.cause = cause; } }
export class DBOSConflictingRegistrationError extends DBOSError {}
export class DBOSNotRegisteredError extends DBOSError { constructor(name: string, full?: string) { super(full ?? name); } }
export class DBOSAwaitedWorkflowCancelledError extends DBOSError { constructor(id: string) { super(`Awaited ${id} cancelled`); } }
export class DBOSAwaitedWorkflowExceededMaxRecoveryAttempts extends DBOSError { constructor(id: string) { super(`Awaited ${id} max`); } }
export class DBOSInvalidWorkflowTransitionError extends DBOSError { constructor(msg?: string) { super(msg ?? 'invalid'); } }
export class DBOSMaxStepRetriesError extends DBOSError { constructor(n: string, m: number, public errors: Error[]) { super(`Step ${n} has exceeded its maximum of ${m} retries.`); } }
export class DBOSStepTimeoutError extends DBOSError { constructor(n: string, t: number) { super(`Step ${n} timed out after ${t}ms`); } }
export class DBOSUnexpectedStepError extends DBOSError { constructor(w: string, s: number, e: string, r: string) { super(`During execution of workflow ${w} step ${s}, function ${r} was recorded when ${e} was expected.`); } }
export class DBOSWorkflowCancelledError extends DBOSError { constructor(id: string) { super(`Workflow ${id} has been cancelled`); } }
export class DBOSWorkflowConflictError extends DBOSError { constructor(id: string) { super(`Conflicting workflow ${id}`); } }
export class DBOSInvalidQueuePriorityError extends DBOSError { constructor(p: number, a: number, b: number) { super(`Invalid priority ${p}. Priority must be between ${a} and ${b}.`); } }
export class DBOSNonExistentWorkflowError extends DBOSError {}
export class DBOSStreamTimeoutError extends DBOSError { constructor(readonly workflowID: string, readonly key: string, readonly timeoutMS?: number) { super(`No value arrived on stream ${key} of workflow ${workflowID}${timeoutMS !== undefined ? ` within ${timeoutMS}ms` : ''}`, 33); this.name = 'DBOSStreamTimeoutError'; } }
export class DBOSStreamNondeterminismError extends DBOSError { constructor(readonly workflowID: string, readonly key: string) { super(`Cannot deterministically read stream ${key} in workflow ${workflowID}: another stream read in the same workflow is still in progress, so which read records which value would depend on task scheduling. Read streams from sequential workflow code, or read them from a step.`, 34); this.name = 'DBOSStreamNondeterminismError'; } }
export function errorFromAgent(w: { code: number; name: string; message: string }, _ctx?: unknown): Error {
  if (w.name === 'workflow_not_found') return new DBOSNonExistentWorkflowError(w.message);
  return new DBOSError(`${w.name}: ${w.message}`);
}
