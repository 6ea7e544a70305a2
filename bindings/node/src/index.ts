/**
 * dbos-agent for Node: DBOS TypeScript's API (@dbos-inc/dbos-sdk 5.x),
 * served by the dbos-agent. Change the import; keep the code.
 */
export { DBOS, ConfiguredInstance } from './dbos';
export * from './types';
export * as Error from './error';
export { DBOSWorkflowConflictError, DBOSStepNondeterminismError, PortableWorkflowError } from './error';
export { DBOSSerializer, SerializationRecipe } from './serialization';
export { DLogger } from './logger';
export type { DBOSSpan } from './tracing';
// ---- exports of the area modules (comm, management, queues, schedules, debouncer, client) ----
export type {
  CancelWorkflowsOptions,
  ForkWorkflowOptions,
  GetWorkflowsInput,
  ListWorkflowStepsOptions,
  RewindWorkflowOptions,
  SetWorkflowDelayOptions,
  StepInfo,
  VersionInfo,
} from './management';
export { DBOSClient, ClientHandle } from './client';
export type { ClientEnqueueOptions, DBOSClientConfig, EnqueueWorkflowOptions } from './client';
export type {
  SendOptions,
  RecvOptions,
  GetEventOptions,
  SetEventOptions,
  WriteStreamOptions,
  ReadStreamOptions,
  ReadStreamOffsetOptions,
} from './comm';
export { WorkflowQueue } from './queues';
export type {
  QueueRateLimit,
  QueueParameters,
  QueueConflictResolution,
  RegisterQueueOptions,
} from './queues';
export { SchedulerMode } from './schedules';
export type { ScheduledWorkflowFn, ScheduleOptions, WorkflowSchedule, SchedulerConfig, ScheduledArgs } from './schedules';
export { Debouncer, DebouncerClient } from './debouncer';
export type { DebounceClient } from './debouncer';
