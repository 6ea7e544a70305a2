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
export class DBOSQueueDuplicatedError extends DBOSError { constructor(readonly workflowID: string, readonly queue: string, readonly deduplicationID: string) { super(`Workflow ${workflowID} was deduplicated due to an existing workflow in queue ${queue} with deduplication ID ${deduplicationID}.`, 9); this.name = 'DBOSQueueDuplicatedError'; } }
export function errorFromAgent(w: { code: number; name: string; message: string; data?: Record<string, unknown> }, ctx?: { workflowID?: string; queueName?: string; deduplicationID?: string }): Error {
  if (w.name === 'workflow_not_found') return new DBOSNonExistentWorkflowError(w.message);
  if (w.name === 'deduplicated') return new DBOSQueueDuplicatedError(String(w.data?.workflow_id ?? ctx?.workflowID ?? ''), String(w.data?.queue_name ?? ctx?.queueName ?? ''), String(w.data?.deduplication_id ?? ctx?.deduplicationID ?? ''));
  return new DBOSError(`${w.name}: ${w.message}`);
}
