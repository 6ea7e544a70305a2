/**
 * DBOS.logger: DBOS TypeScript's DLogger, as DBOS makes it. Without OTLP it
 * is DBOS's console logger (the entry itself to the console method of its
 * level, at or above `logLevel`); the application's own `logger` replaces it
 * entirely. With `enableOTLP` each line carries a timestamp, the application
 * version and the level, as DBOS's winston format prints it, and the records
 * are exported to `otlpLogsEndpoints` (with the trace and span ids of the span
 * they were written in), through the OpenTelemetry logs SDK the application
 * installs (`@opentelemetry/sdk-logs`, `@opentelemetry/exporter-logs-otlp-proto`):
 * a batch processor with a fixed queue, flushed at shutdown.
 */
import { inspect } from 'node:util';
import { requireOptional } from './tracing';
import type { DBOSConfig } from './types';

export interface DLogger {
  info(msg: unknown, metadata?: unknown): void;
  debug(msg: unknown, metadata?: unknown): void;
  warn(msg: unknown, metadata?: unknown): void;
  error(msg: unknown, metadata?: unknown): void;
}

const LEVELS = { debug: 0, info: 1, warn: 2, error: 3 } as const;
type Level = keyof typeof LEVELS;

function levelOf(config: DBOSConfig | undefined): number {
  const level = config?.logLevel ?? 'info';
  if (!(level in LEVELS)) {
    console.warn(`Unknown log level '${level}', defaulting to 'info'. Valid levels: ${Object.keys(LEVELS).join(', ')}`);
    return LEVELS.info;
  }
  return LEVELS[level as Level];
}

/** DBOS's console logger: the entry as given, to the console method of its level. */
function consoleLogger(config: DBOSConfig | undefined): DLogger {
  const min = levelOf(config);
  return {
    debug: (m) => {
      if (min <= LEVELS.debug) console.debug(m);
    },
    info: (m) => {
      if (min <= LEVELS.info) console.log(m);
    },
    warn: (m) => {
      if (min <= LEVELS.warn) console.warn(m);
    },
    error: (m, md) => {
      if (min > LEVELS.error) return;
      const stack = (md as { stack?: string } | undefined)?.stack;
      if (!(m instanceof Error) && stack) console.error(m, '\n', stack);
      else console.error(m);
    },
  };
}

/** The logger DBOS.logger gives before launch (and after it, without OTLP). */
export function makeLogger(config: DBOSConfig | undefined): DLogger {
  if (config?.logger) return config.logger as DLogger;
  return consoleLogger(config);
}

/** What an OTLP log line is stamped with, read when it is written. */
export interface LogIdentity {
  appName: string;
  appVersion(): string;
  applicationID: string;
  executorID(): string;
  /** The active span's ids and attributes, if tracing is on. */
  activeSpan(): { spanContext?(): { traceId: string; spanId: string }; attributes?: Record<string, unknown> } | undefined;
  stringify(v: unknown): string;
}

// OpenTelemetry's severity numbers for DBOS's four levels.
const SEVERITY: Record<Level, number> = { debug: 5, info: 9, warn: 13, error: 17 };

const WHY = 'exporting logs to otlpLogsEndpoints';

interface LogProcessorLike {
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** DBOS.logger once launched with enableOTLP: DBOS's line format, and the records exported. */
export class OTLPLogger implements DLogger {
  readonly #min: number;
  readonly #addContextMetadata: boolean;
  readonly #identity: LogIdentity;
  #emit?: (record: Record<string, unknown>) => void;
  readonly #processors: LogProcessorLike[] = [];

  constructor(config: DBOSConfig, identity: LogIdentity) {
    this.#min = levelOf(config);
    this.#addContextMetadata = Boolean(config.addContextMetadata);
    this.#identity = identity;
    const endpoints = [...new Set(config.otlpLogsEndpoints ?? [])];
    if (endpoints.length === 0) return;
    const logs = requireOptional<typeof import('@opentelemetry/sdk-logs')>('@opentelemetry/sdk-logs', WHY);
    const { OTLPLogExporter } = requireOptional<typeof import('@opentelemetry/exporter-logs-otlp-proto')>(
      '@opentelemetry/exporter-logs-otlp-proto',
      WHY,
    );
    const { resourceFromAttributes } = requireOptional<typeof import('@opentelemetry/resources')>('@opentelemetry/resources', WHY);
    for (const url of endpoints) {
      console.log(`Logs will be exported to ${url}`);
      this.#processors.push(new logs.BatchLogRecordProcessor({ exporter: new OTLPLogExporter({ url }) }));
    }
    const provider = new logs.LoggerProvider({
      resource: resourceFromAttributes({ 'service.name': identity.appName || 'dbos' }),
      processors: this.#processors as InstanceType<typeof logs.BatchLogRecordProcessor>[],
    });
    const otel = provider.getLogger('dbos-logger');
    this.#emit = (record) => otel.emit(record as Parameters<typeof otel.emit>[0]);
  }

  #write(level: Level, entry: unknown, stack: string | undefined): void {
    if (LEVELS[level] < this.#min) return;
    const id = this.#identity;
    const message = typeof entry === 'string' ? entry : id.stringify(entry);
    const span = id.activeSpan();
    const version = id.appVersion();
    const ts = new Date().toISOString().slice(0, 19).replace('T', ' ');
    const context = this.#addContextMetadata ? ` ${id.stringify(span?.attributes)}` : '';
    const trace = stack ? '\n' + stack.split('\n').slice(1).join('\n') : '';
    const line = `${ts}${version ? ` [version ${version}]` : ''} [${level}]: ${message}${context} ${trace}`;
    if (level === 'error') console.error(line);
    else if (level === 'warn') console.warn(line);
    else if (level === 'debug') console.debug(line);
    else console.log(line);
    const ids = span?.spanContext?.();
    this.#emit?.({
      severityNumber: SEVERITY[level],
      severityText: level,
      body: message,
      attributes: Object.fromEntries(
        Object.entries({
          ...(span?.attributes ?? {}),
          traceId: ids?.traceId,
          spanId: ids?.spanId,
          stack,
          applicationID: id.applicationID,
          applicationVersion: version,
          executorID: id.executorID(),
        }).filter(([, v]) => v !== undefined),
      ),
    });
  }

  info(msg: unknown): void {
    this.#write('info', msg, undefined);
  }
  debug(msg: unknown): void {
    this.#write('debug', msg, undefined);
  }
  warn(msg: unknown): void {
    this.#write('warn', msg, undefined);
  }
  error(msg: unknown): void {
    if (msg instanceof Error) {
      let stack = msg.stack ?? `${msg.name}: ${msg.message}`;
      if (msg.cause !== undefined) stack += `\n  [cause]: ${inspect(msg.cause, { depth: 10 })}`;
      this.#write('error', msg.message, stack);
    } else {
      this.#write('error', msg, new Error().stack);
    }
  }

  /** Exports what is queued and stops the exporters (at shutdown). */
  async shutdown(): Promise<void> {
    await Promise.all(
      this.#processors.map(async (p) => {
        try {
          await p.forceFlush();
          await p.shutdown();
        } catch (err) {
          console.warn(`Log export failed at shutdown: ${(err as Error).message}`);
        }
      }),
    );
  }
}
