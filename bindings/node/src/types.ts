/**
 * The public types of DBOS TypeScript 5.x's API that this binding serves,
 * with the same names and fields, so code typed against @dbos-inc/dbos-sdk
 * type-checks against this package.
 */
import type { DBOSSerializer } from './serialization';

export type WorkflowSerializationFormat = undefined | 'native' | 'portable';
export type WorkflowIDReusePolicy = 'return-existing' | 'reject';
export type DuplicationPolicy = 'reject' | 'return-existing';

export interface InputSchema {
  parse(input: unknown): unknown;
}

export interface WorkflowConfig {
  maxRecoveryAttempts?: number;
  name?: string;
  serialization?: WorkflowSerializationFormat;
  inputSchema?: InputSchema;
}

export interface StepConfig {
  retriesAllowed?: boolean;
  intervalSeconds?: number;
  maxAttempts?: number;
  backoffRate?: number;
  shouldRetry?: (error: unknown) => boolean | Promise<boolean>;
  timeoutMS?: number;
  name?: string;
}

export interface FunctionName {
  name?: string;
  className?: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ctorOrProto?: object;
}

export interface EnqueueOptions {
  deduplicationID?: string;
  priority?: number;
  queuePartitionKey?: string;
  delaySeconds?: number;
  applicationName?: string;
  appVersion?: string;
}

export interface StartWorkflowParams {
  workflowID?: string;
  queueName?: string;
  timeoutMS?: number | null;
  enqueueOptions?: EnqueueOptions;
  authenticatedUser?: string;
  authenticatedRoles?: string[];
  duplicationPolicy?: DuplicationPolicy;
  workflowIDReusePolicy?: WorkflowIDReusePolicy;
  workflowAttributes?: Record<string, unknown>;
}

export interface PollingOptions {
  pollingIntervalMs?: number;
}

export interface GetResultOptions extends PollingOptions {
  timeoutSeconds?: number;
  deadlineEpochMS?: number;
}

export interface WorkflowStatus {
  readonly workflowID: string;
  readonly status: string;
  readonly workflowName: string;
  readonly workflowClassName: string;
  readonly workflowConfigName?: string;
  readonly queueName?: string;
  readonly authenticatedUser?: string;
  readonly assumedRole?: string;
  readonly authenticatedRoles?: string[];
  readonly input?: unknown[];
  readonly output?: unknown;
  readonly error?: unknown;
  readonly executorId?: string;
  readonly applicationVersion?: string;
  readonly applicationName?: string;
  readonly createdAt: number;
  readonly updatedAt?: number;
  readonly timeoutMS?: number;
  readonly deadlineEpochMS?: number;
  readonly deduplicationID?: string;
  readonly priority: number;
  readonly queuePartitionKey?: string;
  readonly dequeuedAt?: number;
  readonly delayUntilEpochMS?: number;
  readonly completedAt?: number;
  readonly forkedFrom?: string;
  readonly wasForkedFrom?: boolean;
  readonly parentWorkflowID?: string;
  readonly attributes?: Record<string, unknown>;
  readonly scheduleName?: string;
  readonly recoveryAttempts?: number;
}

export interface WorkflowHandle<R> {
  getStatus(): Promise<WorkflowStatus | null>;
  getResult(options?: PollingOptions): Promise<R>;
  get workflowID(): string;
}

export const StatusString = {
  PENDING: 'PENDING',
  SUCCESS: 'SUCCESS',
  ERROR: 'ERROR',
  MAX_RECOVERY_ATTEMPTS_EXCEEDED: 'MAX_RECOVERY_ATTEMPTS_EXCEEDED',
  CANCELLED: 'CANCELLED',
  ENQUEUED: 'ENQUEUED',
  DELAYED: 'DELAYED',
} as const;

export type WorkflowStatusString =
  | 'PENDING'
  | 'SUCCESS'
  | 'ERROR'
  | 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'
  | 'CANCELLED'
  | 'ENQUEUED'
  | 'DELAYED';

export interface DBOSConfig {
  name?: string;
  systemDatabaseUrl?: string;
  systemDatabasePoolSize?: number;
  systemDatabasePool?: unknown;
  systemDatabaseSchemaName?: string;
  systemDatabasePollingConcurrency?: number;
  enableOTLP?: boolean;
  tracingEnabled?: boolean;
  logLevel?: string;
  logger?: unknown;
  addContextMetadata?: boolean;
  otlpTracesEndpoints?: string[];
  otlpLogsEndpoints?: string[];
  otelAttributeFormat?: 'legacy' | 'semconv';
  adminPort?: number;
  runAdminServer?: boolean;
  applicationVersion?: string;
  executorID?: string;
  serializer?: DBOSSerializer;
  enablePatching?: boolean;
  listenQueues?: string[];
  maxConcurrentQueueDispatches?: number;
  schedulerPollingIntervalMs?: number;
  useListenNotify?: boolean;
  notificationCoalesceMs?: number;
  observabilityQueryTimeoutMs?: number;
  systemDatabaseIdleTransactionTimeoutMs?: number;
  runMigrations?: boolean;
  /** This binding's: the agent's socket (else DBOS_AGENT_SOCKET, else the default path). */
  agentSocket?: string;
  /** This binding's: libdbos.so's path (else DBOS_AGENT_LIBRARY): the library transport. */
  agentLibrary?: string;
  /** This binding's: the library's mode, embedded | sidecar | connect (else DBOS_AGENT_MODE). */
  agentMode?: 'embedded' | 'sidecar' | 'connect';
  /** This binding's: uids besides this process's and root's that may serve the socket. */
  agentTrustedUids?: number[];
}

export interface DBOSLaunchOptions {
  conductorURL?: string;
  conductorKey?: string;
  conductorExecutorMetadata?: Record<string, unknown>;
  conductorMetadataOnlyMode?: boolean;
}

export type WaitFirstOptions = PollingOptions;
export type WaitAllOptions = PollingOptions;

/** DBOS Conductor's alerts (never delivered through an agent; see DBOS.setAlertHandler). */
export type AlertHandler = (name: string, message: string, metadata: Record<string, string>) => Promise<void>;

/** An integration's part in DBOS's launch and shutdown. */
export interface DBOSLifecycleCallback {
  initialize?(): Promise<void>;
  destroy?(): Promise<void>;
  logRegisteredEndpoints?(): void;
}

/** What DBOS.getAssociatedInfo gives an integration about a registered function. */
export interface MethodRegistrationBase {
  name: string;
  className: string;
  workflowConfig?: WorkflowConfig;
  stepConfig?: StepConfig;
  registeredFunction?: (...args: unknown[]) => unknown;
}

export interface ExternalRegistration {
  classConfig?: unknown;
  methodConfig?: unknown;
  methodReg: MethodRegistrationBase;
}

export type OtelAttributeFormat = 'legacy' | 'semconv';

/** Rows a rename moved, by table. */
export interface ApplicationRowCounts {
  queues: number;
  schedules: number;
  versions: number;
  workflows: number;
  steps: number;
}

/** A span of DBOS's tracing: this binding has no tracing, so DBOS.span is always undefined. */
export interface DBOSSpan {
  setAttribute(key: string, value: unknown): unknown;
  addEvent(name: string, attributes?: Record<string, unknown>): unknown;
  end(): void;
}

export type ContextualMetadata = {
  includeContextMetadata?: boolean;
  span?: DBOSSpan;
};

export interface StackTrace {
  stack?: string;
  error?: unknown;
}
