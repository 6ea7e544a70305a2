/**
 * dbos-agent for Node: DBOS TypeScript's API (@dbos-inc/dbos-sdk 5.x),
 * served by the dbos-agent. Change the import; keep the code.
 */
export { DBOS, ConfiguredInstance } from './dbos';
export * from './types';
export * as Error from './error';
// ---- exports of the area modules (comm, management, queues, schedules, debouncer, client) ----
export type {
  SendOptions,
  RecvOptions,
  GetEventOptions,
  SetEventOptions,
  WriteStreamOptions,
  ReadStreamOptions,
  ReadStreamOffsetOptions,
} from './comm';
