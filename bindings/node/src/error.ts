/**
 * The errors of DBOS TypeScript (@dbos-inc/dbos-sdk 5.3), with the same class
 * names, `name`s, numeric `dbosErrorCode`s, constructor parameters, fields and
 * messages, so that code written for the official SDK catches and matches them
 * unchanged; the binding's own errors for the agent; and `errorFromAgent`,
 * which turns an error reply of the agent's protocol into the error DBOS
 * raises in the same situation.
 *
 * Field declarations are kept in DBOS's order: a DBOS error recorded as a step
 * or workflow error is serialized from its own enumerable properties, so the
 * order decides the bytes of the row.
 */

/** A value of plain JSON, as portable JSON carries it. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * The error a workflow recorded in portable JSON comes back as: a record of
 * `name`, `message`, `code` and `data` that any DBOS SDK can write and read,
 * revived as this class rather than the original one.
 */
export class PortableWorkflowError extends Error {
  override readonly name: string;
  readonly code?: string | number | undefined;
  readonly data?: JsonValue | undefined;

  constructor(message: string, name: string, code?: string | number | undefined, data?: JsonValue | undefined) {
    super(message);
    this.name = name;
    this.code = code;
    this.data = data;
  }
}

/** The base of DBOS's errors; `dbosErrorCode` says which one (1: unclassified). */
export class DBOSError extends Error {
  readonly dbosErrorCode: number;

  constructor(msg: string, dbosErrorCode: number = 1) {
    super(msg);
    this.dbosErrorCode = dbosErrorCode;
  }
}

const InitializationError = 3;
/** DBOS could not start: bad configuration, or a system database it cannot use. */
export class DBOSInitializationError extends DBOSError {
  readonly error?: Error | undefined;

  constructor(msg: string, error?: Error | undefined) {
    super(msg, InitializationError);
    this.error = error;
  }
}

const ConflictingWFIDError = 5;
/** This run lost its workflow (recovered elsewhere, or fenced): it stops, and the owner's outcome stands. */
export class DBOSWorkflowConflictError extends DBOSError {
  constructor(workflowID: string) {
    super(`Workflow ${workflowID} is no longer owned by this execution`, ConflictingWFIDError);
  }
}

const NotRegisteredError = 6;
/** A workflow, step, class or data source that was never registered under that name. */
export class DBOSNotRegisteredError extends DBOSError {
  constructor(name: string, fullmsg?: string) {
    super(fullmsg ?? `Operation (Name: ${name}) not registered`, NotRegisteredError);
  }
}

const NonExistentWorkflowError = 16;
/** No workflow has the given ID (the message names it, in DBOS's words for the call). */
export class DBOSNonExistentWorkflowError extends DBOSError {
  constructor(msg: string) {
    super(msg, NonExistentWorkflowError);
  }
}

const MaxRecoveryAttemptsExceededError = 18;
/** A workflow was started or recovered more often than its `maxRecoveryAttempts` allow. */
export class DBOSMaxRecoveryAttemptsExceededError extends DBOSError {
  constructor(workflowID: string, maxRetries?: number) {
    const limit = maxRetries === undefined ? 'number of' : `of ${maxRetries}`;
    super(
      `Workflow ${workflowID} has exceeded its maximum ${limit} execution or recovery attempts. ` +
        `Further attempts to execute or recover it will fail.`,
      MaxRecoveryAttemptsExceededError,
    );
  }
}

const ExecutorNotInitializedError = 20;
/** A DBOS call that needs DBOS.launch() first. */
export class DBOSExecutorNotInitializedError extends DBOSError {
  constructor() {
    super('DBOS not initialized', ExecutorNotInitializedError);
  }
}

const InvalidWorkflowTransition = 21;
/** A DBOS call made where it is not allowed (a workflow call inside a step, and the like). */
export class DBOSInvalidWorkflowTransitionError extends DBOSError {
  constructor(msg?: string) {
    super(msg ?? 'Invalid workflow state', InvalidWorkflowTransition);
  }
}

const ConflictingWorkflowError = 22;
/** A workflow ID started again as another workflow (another name, class or configuration). */
export class DBOSConflictingWorkflowError extends DBOSError {
  constructor(workflowID: string, msg: string) {
    super(`Conflicting workflow invocation with the same ID (${workflowID}): ${msg}`, ConflictingWorkflowError);
  }
}

const MaximumRetriesError = 23;
/** A step with retries failed on every attempt; `errors` holds each attempt's error. */
export class DBOSMaxStepRetriesError extends DBOSError {
  readonly errors: Error[];

  constructor(stepName: string, maxRetries: number, errors: Error[]) {
    const previous = errors.map((e, i) => `Error ${i + 1}: ${e.message}`).join('. ');
    super(
      `Step ${stepName} has exceeded its maximum of ${maxRetries} retries. Previous errors: ${previous}`,
      MaximumRetriesError,
    );
    this.errors = errors;
  }
}

const WorkFlowCancelled = 24;
/** Raised in a workflow that was cancelled, at its next DBOS call. */
export class DBOSWorkflowCancelledError extends DBOSError {
  readonly workflowID: string;

  constructor(workflowID: string) {
    super(`Workflow ${workflowID} has been cancelled`, WorkFlowCancelled);
    this.workflowID = workflowID;
  }
}

const ConflictingRegistrationError = 25;
/** Two registrations under one name, or a registration after DBOS.launch(). */
export class DBOSConflictingRegistrationError extends DBOSError {
  constructor(msg: string) {
    super(msg, ConflictingRegistrationError);
  }
}

export const UnexpectedStep = 26;
/** Replay found another function recorded at this step ID: the workflow is not deterministic (or a patch is not backward compatible). */
export class DBOSUnexpectedStepError extends DBOSError {
  readonly workflowID: string;
  readonly stepID: number;
  readonly expectedName: string;

  constructor(workflowID: string, stepID: number, expectedName: string, recordedName: string) {
    const where = `During execution of workflow ${workflowID} step ${stepID}, function ${recordedName} was recorded when ${expectedName} was expected.`;
    // DBOS's patch message keeps its source's line break and indentation.
    super(
      recordedName.startsWith('DBOS.patch')
        ? `${where}\n\n          Check that your patches are backward compatible, that you do not have older code trying to recover workflows with newer patches, and that your workflow is deterministic.`
        : `${where} Check that your workflow is deterministic.`,
      UnexpectedStep,
    );
    this.workflowID = workflowID;
    this.stepID = stepID;
    this.expectedName = expectedName;
  }
}

const TargetWorkflowCancelled = 27;
/** The workflow whose result was awaited was cancelled. */
export class DBOSAwaitedWorkflowCancelledError extends DBOSError {
  readonly workflowID: string;

  constructor(workflowID: string) {
    super(`Awaited ${workflowID} was cancelled`, TargetWorkflowCancelled);
    this.workflowID = workflowID;
  }
}

export const QueueDedupIDDuplicated = 28;
/** The queue already holds an active workflow with this deduplication ID. */
export class DBOSQueueDuplicatedError extends DBOSError {
  readonly workflowID: string;
  readonly queue: string;
  readonly deduplicationID: string;

  constructor(workflowID: string, queue: string, deduplicationID: string) {
    super(
      `Workflow ${workflowID} was deduplicated due to an existing workflow in queue ${queue} with deduplication ID ${deduplicationID}.`,
      QueueDedupIDDuplicated,
    );
    this.workflowID = workflowID;
    this.queue = queue;
    this.deduplicationID = deduplicationID;
    // Set, as DBOS sets it: a portable record keeps only the name, and the debouncer matches on it.
    this.name = 'DBOSQueueDuplicatedError';
  }
}

const InvalidQueuePriority = 29;
/** A queue priority outside DBOS's range. */
export class DBOSInvalidQueuePriorityError extends DBOSError {
  readonly priority: number;
  readonly min: number;
  readonly max: number;

  constructor(priority: number, min: number, max: number) {
    super(`Invalid priority ${priority}. Priority must be between ${min} and ${max}.`, InvalidQueuePriority);
    this.priority = priority;
    this.min = min;
    this.max = max;
  }
}

const AwaitedWorkflowExceededMaxRecoveryAttempts = 30;
/** The workflow whose result was awaited was dead-lettered. */
export class DBOSAwaitedWorkflowExceededMaxRecoveryAttempts extends DBOSError {
  readonly workflowID: string;

  constructor(workflowID: string) {
    super(`Awaited ${workflowID} exceeded its maximum recovery attempts`, AwaitedWorkflowExceededMaxRecoveryAttempts);
    this.workflowID = workflowID;
  }
}

const StepTimeout = 31;
/** One attempt of a step ran longer than the step's `timeoutMS`. */
export class DBOSStepTimeoutError extends DBOSError {
  readonly stepName: string;
  readonly timeoutMS: number;

  constructor(stepName: string, timeoutMS: number) {
    super(`Step ${stepName} timed out after ${timeoutMS}ms`, StepTimeout);
    this.stepName = stepName;
    this.timeoutMS = timeoutMS;
  }
}

const InvalidWorkflowInput = 32;
/** A workflow's arguments could not be serialized; the message blames them, nothing else. */
export class DBOSInvalidWorkflowInputError extends DBOSError {
  constructor(workflowName: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`Could not serialize the arguments to workflow ${workflowName}: ${why}`, InvalidWorkflowInput);
  }
}

export const StreamTimeout = 33;
/** A stream read got nothing in time, or the stream closed before the offset asked for. */
export class DBOSStreamTimeoutError extends DBOSError {
  readonly workflowID: string;
  readonly key: string;
  readonly timeoutMS?: number | undefined;

  constructor(workflowID: string, key: string, timeoutMS?: number | undefined) {
    // Without a timeout the stream ended short of the value, so none will ever come.
    const within = timeoutMS !== undefined ? ` within ${timeoutMS}ms` : '';
    super(`No value arrived on stream ${key} of workflow ${workflowID}${within}`, StreamTimeout);
    this.workflowID = workflowID;
    this.key = key;
    this.timeoutMS = timeoutMS;
    this.name = 'DBOSStreamTimeoutError';
  }
}

export const StreamNondeterminism = 34;
/** Two stream reads of one workflow at once: which records what would depend on scheduling. */
export class DBOSStreamNondeterminismError extends DBOSError {
  readonly workflowID: string;
  readonly key: string;

  constructor(workflowID: string, key: string) {
    super(
      `Cannot deterministically read stream ${key} in workflow ${workflowID}: another stream read ` +
        `in the same workflow is still in progress, so which read records which value would depend ` +
        `on task scheduling. Read streams from sequential workflow code, or read them from a step.`,
      StreamNondeterminism,
    );
    this.workflowID = workflowID;
    this.key = key;
    this.name = 'DBOSStreamNondeterminismError';
  }
}

export const QueryTimeout = 35;
/** An observability query ran past its statement timeout. */
export class DBOSQueryTimeoutError extends DBOSError {
  readonly timeoutMS: number;

  constructor(timeoutMS: number) {
    super(`This query was cancelled after exceeding its ${timeoutMS}ms statement timeout.`, QueryTimeout);
    this.timeoutMS = timeoutMS;
    this.name = 'DBOSQueryTimeoutError';
  }
}

export const WorkflowIDInUse = 36;
/** A start with `workflowIDReusePolicy: 'reject'` found its ID taken. A replayed one is no instance of this class: test with `isWorkflowIDInUseError`. */
export class DBOSWorkflowIDInUseError extends DBOSError {
  readonly workflowID: string;
  readonly status: string;
  readonly workflowName: string;

  constructor(workflowID: string, status: string, workflowName: string) {
    super(`Workflow ID ${workflowID} is already in use by workflow ${workflowName} with status ${status}.`, WorkflowIDInUse);
    this.workflowID = workflowID;
    this.status = status;
    this.workflowName = workflowName;
    this.name = 'DBOSWorkflowIDInUseError';
  }
}

export const StepNondeterminism = 37;
/** One run recorded the same step ID twice with different outcomes. */
export class DBOSStepNondeterminismError extends DBOSError {
  readonly workflowID: string;
  readonly stepID: number;

  constructor(workflowID: string, stepID: number) {
    super(
      `Step ${stepID} of workflow ${workflowID} was recorded twice by the same execution with different results. Check that your workflow is deterministic.`,
      StepNondeterminism,
    );
    this.workflowID = workflowID;
    this.stepID = stepID;
    this.name = 'DBOSStepNondeterminismError';
  }
}

/**
 * Whether `e` is a stream read's timeout: a live one, one revived from a row
 * (a plain Error keeping `dbosErrorCode`), or a portable one (keeping only its
 * name), where `instanceof` cannot tell.
 */
export function isStreamTimeoutError(e: unknown): boolean {
  if (e instanceof Error && getDBOSErrorCode(e) === StreamTimeout) return true;
  return e instanceof PortableWorkflowError && e.name === 'DBOSStreamTimeoutError';
}

/** Whether `e` is a refused start on an ID in use, live or revived (as for isStreamTimeoutError). */
export function isWorkflowIDInUseError(e: unknown): boolean {
  if (e instanceof Error && getDBOSErrorCode(e) === WorkflowIDInUse) return true;
  return e instanceof PortableWorkflowError && e.name === 'DBOSWorkflowIDInUseError';
}

/** The `dbosErrorCode` of `e` (also of a replayed error, which keeps the field but not the class). */
export function getDBOSErrorCode(e: Error): number | undefined {
  if (e && typeof e === 'object' && 'dbosErrorCode' in e) {
    const code = (e as { dbosErrorCode: unknown }).dbosErrorCode;
    return typeof code === 'number' ? code : undefined;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// The binding's own errors: situations DBOS has none for, because DBOS talks
// to Postgres itself. Their codes follow the Python binding's (100 and up).

/** The binding's `dbosErrorCode`s, above any DBOS TypeScript uses. */
export const AgentUnavailable = 100;
export const AgentProtocol = 101;
export const AgentUntrusted = 103;

/**
 * The agent cannot be reached (no socket, a refused connection, a library that
 * would not load), or the connection dropped while a request was in flight.
 */
export class DBOSAgentUnavailableError extends DBOSError {
  constructor(msg: string, options?: { cause?: unknown }) {
    super(msg, AgentUnavailable);
    if (options?.cause !== undefined) {
      Object.defineProperty(this, 'cause', { value: options.cause, enumerable: false, writable: true, configurable: true });
    }
    this.name = 'DBOSAgentUnavailableError';
  }
}

/**
 * A handle of libdbos.so used by a child after fork() of the process that
 * opened it: the library refuses every such call, since its Go runtime's
 * threads did not survive the fork (open after the fork instead).
 */
export class DBOSAgentForkedError extends DBOSAgentUnavailableError {
  constructor(msg: string) {
    super(msg);
    this.name = 'DBOSAgentForkedError';
  }
}

/**
 * The socket is served by a process of a user this process does not trust (not
 * its own user, not root, not one in DBOS_AGENT_TRUSTED_UIDS): the binding
 * closed the connection without sending or reading anything.
 */
export class DBOSAgentUntrustedError extends DBOSError {
  /** The socket. */
  readonly path: string;
  /** The user serving it. */
  readonly uid: number;

  constructor(msg: string, path: string = '', uid: number = -1) {
    super(msg, AgentUntrusted);
    this.path = path;
    this.uid = uid;
    this.name = 'DBOSAgentUntrustedError';
  }
}

/**
 * An error reply of the agent with no DBOS counterpart: a malformed frame, an
 * unknown op, a version mismatch, the agent shutting down, a wait that timed
 * out... `code` and `codeName` are the protocol's (PROTOCOL.md section 10),
 * `agentMessage` and `data` what the agent said. `name` stays the class's, as
 * for every other error here.
 */
export class DBOSAgentProtocolError extends DBOSError {
  /** The protocol's numeric error code. */
  readonly code: number;
  /** The protocol's snake_case name of the code. */
  readonly codeName: string;
  /** The agent's message, unprefixed. */
  readonly agentMessage: string;
  /** The code-specific details the agent sent, if any. */
  readonly data?: Record<string, unknown> | undefined;

  constructor(code: number, codeName: string, message: string, data?: Record<string, unknown>) {
    super(codeName || code ? `agent error ${codeName || code}: ${message}` : message, AgentProtocol);
    this.code = code;
    this.codeName = codeName;
    this.agentMessage = message;
    this.data = data;
    this.name = 'DBOSAgentProtocolError';
  }
}

// ---------------------------------------------------------------------------
// The agent's error catalog (protocol/testdata/error_codes.json), mapped to
// the errors DBOS TypeScript raises in the same situations.

/** An error reply as it comes off the wire (PROTOCOL.md section 10). */
export interface AgentErrorReply {
  code: number;
  name: string;
  message: string;
  data?: Record<string, unknown>;
}

/**
 * What the call that got the error knows, to fill the DBOS constructors'
 * fields the reply does not carry.
 */
export interface AgentErrorContext {
  /** The workflow the call was about (the caller's, for a step). */
  workflowID?: string;
  /** The step's function ID, for a step's record. */
  stepID?: number;
  /** The name the call attempted to record, for `unexpected_step`. */
  stepName?: string;
  /** The workflow function's name, for `not_registered`. */
  workflowName?: string;
  /** The op, where DBOS words an error per call: `send`'s missing destination. */
  op?: string;
  /** The destination of a `send`. */
  destinationID?: string;
  /** The queue and deduplication ID of an enqueue, when the reply has none. */
  queueName?: string;
  deduplicationID?: string;
  /** A stream read's key and timeout: its `timeout` is DBOS's DBOSStreamTimeoutError. */
  streamKey?: string;
  timeoutMS?: number;
  /** The workflow's maxRecoveryAttempts, for its message. */
  maxRecoveryAttempts?: number;
  /** The call awaits another workflow's outcome: a cancelled or dead-lettered one is DBOS's Awaited... error. */
  awaited?: boolean;
}

/**
 * The class `errorFromAgent` gives for each code of the catalog (a test checks
 * it against protocol/testdata/error_codes.json). `timeout` (207) is a
 * DBOSStreamTimeoutError for a stream read and a DBOSAgentProtocolError
 * elsewhere: DBOS answers a timed-out getResult, recv or getEvent with null,
 * which the caller does on `isAgentTimeout`.
 */
export const AGENT_ERROR_CLASSES: Readonly<Record<number, string>> = Object.freeze({
  100: 'DBOSError',
  101: 'DBOSAgentProtocolError',
  102: 'DBOSAgentProtocolError',
  103: 'DBOSAgentProtocolError',
  104: 'DBOSError',
  105: 'DBOSAgentProtocolError',
  106: 'DBOSAgentProtocolError',
  107: 'DBOSAgentProtocolError',
  108: 'DBOSError',
  109: 'DBOSNotRegisteredError',
  110: 'DBOSAgentProtocolError',
  111: 'DBOSAgentProtocolError',
  112: 'DBOSAgentProtocolError',
  200: 'DBOSNonExistentWorkflowError',
  201: 'DBOSConflictingWorkflowError',
  202: 'DBOSQueueDuplicatedError',
  203: 'DBOSWorkflowConflictError',
  204: 'DBOSWorkflowCancelledError',
  205: 'DBOSUnexpectedStepError',
  206: 'DBOSStepNondeterminismError',
  207: 'DBOSAgentProtocolError',
  208: 'DBOSMaxRecoveryAttemptsExceededError',
  209: 'DBOSError',
  210: 'DBOSError',
  211: 'DBOSWorkflowIDInUseError',
});

/** The protocol's `timeout` code. */
export const AGENT_TIMEOUT_CODE = 207;

/** True if `e` is the agent's `timeout` for a wait DBOS answers with null (getResult, recv, getEvent). */
export function isAgentTimeout(e: unknown): boolean {
  return e instanceof DBOSAgentProtocolError && e.code === AGENT_TIMEOUT_CODE;
}

function text(v: unknown): string | undefined {
  return v === undefined || v === null || v === '' ? undefined : String(v);
}

/**
 * Turns an error reply of the agent into the error DBOS TypeScript raises in
 * the same situation, its fields filled from the reply's `data` and the
 * call's context. Unknown codes go by range: 2xx (understood and refused) is
 * a DBOSError, anything else a DBOSAgentProtocolError; both keep the name and
 * the message.
 */
export function errorFromAgent(e: AgentErrorReply, ctx: AgentErrorContext = {}): Error {
  const data = e.data ?? {};
  const wid = ctx.workflowID ?? text(data['workflow_id']) ?? '';
  switch (e.code) {
    case 109:
      return new DBOSNotRegisteredError(ctx.workflowName ?? '', ctx.workflowName === undefined ? e.message : undefined);
    case 200:
      if (ctx.op === 'send') {
        return new DBOSNonExistentWorkflowError(`Sent to non-existent destination workflow UUID: ${ctx.destinationID ?? wid}`);
      }
      // The agent names every missing ID (a batch's, joined), as DBOS does.
      return new DBOSNonExistentWorkflowError(`Workflow ${text(data['workflow_id']) ?? wid} does not exist`);
    case 201:
      // The agent's message is the reason alone; DBOS wraps it.
      return new DBOSConflictingWorkflowError(wid, e.message);
    case 202:
      // A debounce's refusal names the key's holder, as DBOS's does.
      return new DBOSQueueDuplicatedError(
        text(data['workflow_id']) ?? wid,
        text(data['queue_name']) ?? ctx.queueName ?? '',
        text(data['deduplication_id']) ?? ctx.deduplicationID ?? '',
      );
    case 203:
      return new DBOSWorkflowConflictError(wid);
    case 204:
      return ctx.awaited ? new DBOSAwaitedWorkflowCancelledError(wid) : new DBOSWorkflowCancelledError(wid);
    case 205:
      return new DBOSUnexpectedStepError(
        wid,
        ctx.stepID ?? 0,
        text(data['attempted']) ?? ctx.stepName ?? '?',
        text(data['recorded']) ?? '?',
      );
    case 206:
      return new DBOSStepNondeterminismError(wid, ctx.stepID ?? 0);
    case AGENT_TIMEOUT_CODE:
      if (ctx.streamKey !== undefined) return new DBOSStreamTimeoutError(wid, ctx.streamKey, ctx.timeoutMS);
      return new DBOSAgentProtocolError(e.code, e.name, e.message, e.data);
    case 208:
      return ctx.awaited
        ? new DBOSAwaitedWorkflowExceededMaxRecoveryAttempts(wid)
        : new DBOSMaxRecoveryAttemptsExceededError(wid, ctx.maxRecoveryAttempts);
    case 211:
      return new DBOSWorkflowIDInUseError(
        text(data['workflow_id']) ?? wid,
        text(data['status']) ?? '',
        text(data['name']) ?? '',
      );
    case 100:
    case 104:
    case 108:
    case 209:
    case 210:
      return new DBOSError(`${e.name}: ${e.message}`);
  }
  if (AGENT_ERROR_CLASSES[e.code] === undefined && e.code >= 200 && e.code < 300) {
    return new DBOSError(`${e.name || e.code}: ${e.message}`);
  }
  return new DBOSAgentProtocolError(e.code, e.name, e.message, e.data);
}
