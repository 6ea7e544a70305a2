/**
 * DBOS.logger: DBOS TypeScript's DLogger, writing to the console at the
 * configured level (or to the application's own logger, when it gives one).
 */
import type { DBOSConfig } from './types';

export interface DLogger {
  info(msg: unknown, metadata?: unknown): void;
  debug(msg: unknown, metadata?: unknown): void;
  warn(msg: unknown, metadata?: unknown): void;
  error(msg: unknown, metadata?: unknown): void;
}

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;

export function makeLogger(config: DBOSConfig | undefined): DLogger {
  if (config?.logger) return config.logger as DLogger;
  const min = Math.max(0, LEVELS.indexOf((config?.logLevel ?? 'info').toLowerCase() as (typeof LEVELS)[number]));
  const write = (level: (typeof LEVELS)[number], msg: unknown, metadata?: unknown) => {
    if (LEVELS.indexOf(level) < min) return;
    const text = msg instanceof Error ? (msg.stack ?? msg.message) : typeof msg === 'string' ? msg : JSON.stringify(msg);
    const line = `${new Date().toISOString()} [${level}]: ${text}${metadata === undefined ? '' : ' ' + JSON.stringify(metadata)}`;
    if (level === 'error') console.error(line);
    else if (level === 'warn') console.warn(line);
    else console.log(line);
  };
  return {
    debug: (m, md) => write('debug', m, md),
    info: (m, md) => write('info', m, md),
    warn: (m, md) => write('warn', m, md),
    error: (m, md) => write('error', m, md),
  };
}
