/**
 * OpenTelemetry spans around workflows and steps, as DBOS TypeScript makes
 * them: the same span names, attributes (legacy or semconv), nesting, status
 * and retry events, so a trace looks the same whichever runs the code.
 *
 * OpenTelemetry is optional, as in DBOS: nothing is loaded unless the config
 * turns tracing on (`tracingEnabled`, or `enableOTLP`, on by default only in
 * DBOS Cloud), and then the application installs the packages it needs:
 * `@opentelemetry/api` always; `@opentelemetry/sdk-trace-base` and
 * `@opentelemetry/context-async-hooks` when no tracer provider is registered
 * yet; `@opentelemetry/exporter-trace-otlp-proto` to export to
 * `otlpTracesEndpoints`. The packages are required lazily so a binding without
 * tracing pulls in none of them.
 *
 * Export is bounded where DBOS's own collector is not: ended spans go through
 * the SDK's BatchSpanProcessor (a fixed queue; spans beyond it are dropped and
 * the SDK counts them), flushed at shutdown.
 */
/* eslint-disable @typescript-eslint/no-require-imports */
import { DBOSInitializationError } from './error';

type AttributeValue =
  | string
  | number
  | boolean
  | Array<null | undefined | string>
  | Array<null | undefined | number>
  | Array<null | undefined | boolean>;
interface Attributes {
  [attributeKey: string]: AttributeValue | undefined;
}

export enum SpanStatusCode {
  UNSET = 0,
  OK = 1,
  ERROR = 2,
}

interface SpanStatus {
  code: SpanStatusCode;
  message?: string;
}

/** The span DBOS.span gives workflow code (DBOS TypeScript's DBOSSpan). */
export type DBOSSpan = {
  setStatus(status: SpanStatus): DBOSSpan;
  attributes: Attributes;
  setAttribute(key: string, attribute: AttributeValue): DBOSSpan;
  addEvent(name: string, attributesOrStartTime?: Attributes, timeStamp?: number): DBOSSpan;
};

/** What of an OpenTelemetry SDK span this module uses (end, attributes in bulk). */
interface OtelSpan extends DBOSSpan {
  setAttributes(attributes: Attributes): OtelSpan;
  end(endTime?: unknown): void;
}

// The legacy attribute names DBOS TypeScript writes and their OpenTelemetry
// semconv-style names (otelAttributeFormat: 'semconv'), as DBOS maps them.
const SEMCONV_NAMES: Record<string, string> = {
  operationUUID: 'dbos.operation.workflow_id',
  operationType: 'dbos.operation.type',
  operationName: 'dbos.operation.name',
  applicationID: 'dbos.application.id',
  applicationVersion: 'dbos.application.version',
  executorID: 'dbos.executor.id',
  queueName: 'dbos.queue.name',
  authenticatedUser: 'dbos.user.name',
  authenticatedRoles: 'dbos.user.roles',
  assumedRole: 'dbos.user.assumed_role',
};

/** A span that records nothing: what DBOS.tracer hands out with tracing off. */
class StubSpan implements DBOSSpan {
  attributes: Attributes = {};
  setStatus(): DBOSSpan {
    return this;
  }
  setAttribute(): DBOSSpan {
    return this;
  }
  addEvent(): DBOSSpan {
    return this;
  }
}

type OtelApi = typeof import('@opentelemetry/api');

export interface TracingConfig {
  appName: string;
  appVersion: string;
  executorID: string;
  tracingEnabled?: boolean;
  enableOTLP?: boolean;
  otlpTracesEndpoints?: string[];
  otelAttributeFormat?: 'legacy' | 'semconv';
}

/** A package the application installs for what it turned on, named in a clear error if it did not. */
export function requireOptional<T>(pkg: string, why: string): T {
  try {
    return require(pkg) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') {
      throw new DBOSInitializationError(`${why} needs the package ${pkg}: install it (npm install ${pkg})`);
    }
    throw err;
  }
}

/** Whether a context manager that carries spans across awaits is registered (DBOS's probe). */
function contextWorks(api: OtelApi): boolean {
  const span = api.trace.getTracer('otel-bootstrap-check').startSpan('probe');
  let visible = false;
  api.context.with(api.trace.setSpan(api.context.active(), span), () => {
    visible = api.trace.getSpan(api.context.active()) === span;
  });
  span.end();
  return visible;
}

interface SpanProcessorLike {
  onEnd(span: never): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** DBOS.tracer: starts and ends DBOS's spans. */
export class Tracer {
  readonly applicationID: string;
  readonly executorID: string;
  readonly enabled: boolean;
  readonly #appVersion: string;
  readonly #semconv: boolean;
  readonly #api?: OtelApi;
  /** DBOS's own exporters (otlpTracesEndpoints): each ended DBOS span is handed to them, as DBOS pushes it to its collector. */
  readonly #exporters: SpanProcessorLike[] = [];

  constructor(config: TracingConfig) {
    this.applicationID = process.env.DBOS__APPID ?? '';
    this.executorID = config.executorID;
    this.#appVersion = config.appVersion;
    this.#semconv = config.otelAttributeFormat === 'semconv';
    const exportOTLP = config.enableOTLP ?? process.env.DBOS__CLOUD === 'true';
    this.enabled = Boolean(config.tracingEnabled) || exportOTLP;
    if (!this.enabled) return;
    const api = requireOptional<OtelApi>('@opentelemetry/api', 'tracing (tracingEnabled or enableOTLP)');
    this.#api = api;
    const endpoints = exportOTLP ? [...new Set(config.otlpTracesEndpoints ?? [])] : [];
    const installProvider = !contextWorks(api);
    if (!installProvider && endpoints.length === 0) return;
    const sdk = requireOptional<typeof import('@opentelemetry/sdk-trace-base')>(
      '@opentelemetry/sdk-trace-base',
      installProvider ? 'tracing without a registered tracer provider' : 'exporting traces to otlpTracesEndpoints',
    );
    for (const url of endpoints) {
      const { OTLPTraceExporter } = requireOptional<typeof import('@opentelemetry/exporter-trace-otlp-proto')>(
        '@opentelemetry/exporter-trace-otlp-proto',
        'exporting traces to otlpTracesEndpoints',
      );
      console.log(`Traces will be exported to ${url}`);
      this.#exporters.push(new sdk.BatchSpanProcessor(new OTLPTraceExporter({ url })));
    }
    if (installProvider) {
      const { AsyncLocalStorageContextManager } = requireOptional<typeof import('@opentelemetry/context-async-hooks')>(
        '@opentelemetry/context-async-hooks',
        'tracing without a registered context manager',
      );
      const { resourceFromAttributes } = requireOptional<typeof import('@opentelemetry/resources')>(
        '@opentelemetry/resources',
        'tracing without a registered tracer provider',
      );
      // Both are "first one wins": an application's own registration stands.
      api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      api.trace.setGlobalTracerProvider(
        new sdk.BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': config.appName || 'dbos' }) }),
      );
    }
  }

  /** The name an attribute is written under, per otelAttributeFormat. */
  resolveAttributeName(key: string): string {
    return this.#semconv ? (SEMCONV_NAMES[key] ?? key) : key;
  }

  startSpan(name: string, attributes?: Attributes, parent?: DBOSSpan): DBOSSpan {
    const api = this.#api;
    if (!api) return new StubSpan();
    const tracer = api.trace.getTracer('dbos-tracer');
    const mapped: Attributes = {};
    for (const [k, v] of Object.entries(attributes ?? {})) mapped[this.resolveAttributeName(k)] = v;
    const ctx = parent ? api.trace.setSpan(api.context.active(), parent as unknown as import('@opentelemetry/api').Span) : undefined;
    return tracer.startSpan(name, { attributes: mapped as import('@opentelemetry/api').Attributes }, ctx) as unknown as DBOSSpan;
  }

  endSpan(span: DBOSSpan): void {
    if (!this.#api || span instanceof StubSpan) return;
    const s = span as OtelSpan;
    s.setAttributes({
      [this.resolveAttributeName('applicationID')]: this.applicationID,
      [this.resolveAttributeName('applicationVersion')]: this.#appVersion,
    });
    const executorKey = this.resolveAttributeName('executorID');
    if (!s.attributes || !(executorKey in s.attributes)) s.setAttribute(executorKey, this.executorID);
    s.end();
    for (const e of this.#exporters) e.onEnd(s as never);
  }

  /** Runs fn with span as the active span (its steps and children nest under it). */
  runWithSpan<R>(span: DBOSSpan, fn: () => Promise<R>): Promise<R> {
    const api = this.#api;
    if (!api || span instanceof StubSpan) return fn();
    return api.context.with(api.trace.setSpan(api.context.active(), span as unknown as import('@opentelemetry/api').Span), fn);
  }

  /** The active span, if tracing is on (DBOS.span). */
  activeSpan(): DBOSSpan | undefined {
    return this.#api?.trace.getActiveSpan() as unknown as DBOSSpan | undefined;
  }

  /** Exports what is queued and stops the exporters (at shutdown). */
  async shutdown(): Promise<void> {
    await Promise.all(this.#exporters.map(async (p) => {
      try {
        await p.forceFlush();
        await p.shutdown();
      } catch (err) {
        console.warn(`Trace export failed at shutdown: ${(err as Error).message}`);
      }
    }));
  }
}

/** A span's status from an outcome: OK, or ERROR with the error's message, as DBOS sets it. */
export function endWith(tracer: Tracer, span: DBOSSpan, error?: unknown): void {
  span.setStatus(
    error === undefined
      ? { code: SpanStatusCode.OK }
      : { code: SpanStatusCode.ERROR, message: (error as Error)?.message ?? String(error) },
  );
  tracer.endSpan(span);
}
