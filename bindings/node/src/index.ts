/**
 * dbos-agent for Node: DBOS TypeScript's API (@dbos-inc/dbos-sdk 5.x),
 * served by the dbos-agent. Change the import; keep the code.
 */
export { DBOS, ConfiguredInstance } from './dbos';
export * from './types';
export * as Error from './error';
// ---- exports of the area modules (comm, management, queues, schedules, debouncer, client) ----
export { WorkflowQueue } from './queues';
export type {
  QueueRateLimit,
  QueueParameters,
  QueueConflictResolution,
  RegisterQueueOptions,
  EnqueueWorkflowOptions,
} from './queues';
export { SchedulerMode } from './schedules';
export type { ScheduledWorkflowFn, ScheduleOptions, WorkflowSchedule, SchedulerConfig, ScheduledArgs } from './schedules';
export { Debouncer, DebouncerClient } from './debouncer';
export type { DebounceClient } from './debouncer';
