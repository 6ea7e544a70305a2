/**
 * OpenTelemetry: the spans DBOS TypeScript makes around workflows and steps
 * (names, attributes, nesting, status, retry events) recorded by the
 * application's own tracer provider, and exported over OTLP to
 * otlpTracesEndpoints, here a real HTTP server standing in for a collector.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { DBOS } from '../src';
import { Tracer } from '../src/tracing';
import { Agent, freshAgent } from './harness';

// The application's own provider, registered before DBOS launches, as an app with its own tracing does.
const recorded = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(recorded)] }));

let agent: Agent;
let collector: Server;
// What the collector received, by path, and a wake-up for the first body of each.
const received = new Map<string, Buffer[]>();
const arrivals = new Map<string, () => void>();
const arrived = (path: string) => new Promise<void>((resolve) => {
  if (received.has(path)) resolve();
  else arrivals.set(path, resolve);
});
let flaky = 0;

const flakyStep = DBOS.registerStep(
  async () => {
    DBOS.span?.setAttribute('attempted', true);
    DBOS.logger.info(`flaky attempt ${flaky + 1}`);
    if (flaky++ === 0) throw new Error('not yet');
    return 'ok';
  },
  { name: 'flakyStep', retriesAllowed: true, intervalSeconds: 0.01, maxAttempts: 3 },
);

const childWorkflow = DBOS.registerWorkflow(async (x: number) => x + 1, { name: 'tracedChild' });

const tracedWorkflow = DBOS.registerWorkflow(
  async (x: number) => {
    const s = await flakyStep();
    const child = await DBOS.startWorkflow(childWorkflow)(x);
    return `${s}:${await child.getResult()}`;
  },
  { name: 'tracedWorkflow' },
);

const failingWorkflow = DBOS.registerWorkflow(
  async () => {
    throw new Error('it failed');
  },
  { name: 'tracedFailure' },
);

before(async () => {
  collector = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      if (req.headers['content-type'] === 'application/x-protobuf') {
        received.set(path, [...(received.get(path) ?? []), Buffer.concat(parts)]);
        arrivals.get(path)?.();
      }
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const port = (collector.address() as AddressInfo).port;
  agent = await freshAgent('tracing');
  DBOS.setConfig({
    ...(agent.config('tracing-app') as object),
    tracingEnabled: true,
    enableOTLP: true,
    otlpTracesEndpoints: [`http://127.0.0.1:${port}/v1/traces`],
    otlpLogsEndpoints: [`http://127.0.0.1:${port}/v1/logs`],
  } as never);
  await DBOS.launch();
});

after(async () => {
  await DBOS.shutdown();
  await agent.cleanup();
  collector.close();
});

function spansNamed(name: string): ReadableSpan[] {
  return recorded.getFinishedSpans().filter((s) => s.name === name);
}

test('a workflow, its retried step and its child are spans as DBOS makes them', async () => {
  const h = await DBOS.startWorkflow(tracedWorkflow, { workflowID: 'traced-wf-1' })(4);
  assert.equal(await h.getResult(), 'ok:5');

  const [wf] = spansNamed('tracedWorkflow');
  assert.ok(wf, 'the workflow has a span');
  assert.equal(wf.attributes.operationUUID, 'traced-wf-1');
  assert.equal(wf.attributes.operationType, 'workflow');
  assert.equal(wf.attributes.operationName, 'tracedWorkflow');
  assert.equal(wf.attributes.status, 'PENDING');
  assert.equal(wf.attributes.executorID, DBOS.executorID);
  assert.equal(wf.attributes.applicationVersion, DBOS.applicationVersion);
  assert.equal(wf.status.code, 1, 'OK');

  const [step] = spansNamed('flakyStep');
  assert.ok(step, 'the step has a span');
  assert.equal(step.parentSpanContext?.spanId, wf.spanContext().spanId, 'the step nests under its workflow');
  assert.equal(step.spanContext().traceId, wf.spanContext().traceId);
  assert.equal(step.attributes.operationType, 'step');
  assert.equal(step.attributes.operationUUID, 'traced-wf-1');
  assert.equal(step.attributes.retriesAllowed, true);
  assert.equal(step.attributes.maxAttempts, 3);
  assert.equal(step.attributes.attempted, true, 'DBOS.span inside a step is the step span');
  assert.equal(step.status.code, 1);
  assert.deepEqual(step.events.map((e) => e.name), ['Step attempt 1 failed']);
  assert.equal(step.events[0].attributes?.error, 'not yet');
  assert.equal(step.events[0].attributes?.retryIntervalSeconds, 0.01);

  const [child] = spansNamed('tracedChild');
  assert.ok(child, 'the child has a span');
  assert.equal(child.attributes.operationUUID, 'traced-wf-1-1');
  assert.equal(child.parentSpanContext?.spanId, wf.spanContext().spanId, 'a child started from workflow code nests under it');
});

test('a failing workflow span has the error status and message', async () => {
  await assert.rejects(failingWorkflow(), /it failed/);
  const [span] = spansNamed('tracedFailure');
  assert.ok(span);
  assert.equal(span.status.code, 2, 'ERROR');
  assert.equal(span.status.message, 'it failed');
});

test('semconv attribute names map as DBOS maps them', () => {
  const t = new Tracer({
    appName: 'x',
    appVersion: 'v',
    executorID: 'e',
    tracingEnabled: true,
    otelAttributeFormat: 'semconv',
  });
  assert.equal(t.resolveAttributeName('operationUUID'), 'dbos.operation.workflow_id');
  assert.equal(t.resolveAttributeName('executorID'), 'dbos.executor.id');
  assert.equal(t.resolveAttributeName('somethingElse'), 'somethingElse');
  const span = t.startSpan('manual', { operationUUID: 'w', operationType: 'step' });
  t.endSpan(span);
  const [s] = spansNamed('manual');
  assert.equal(s.attributes['dbos.operation.workflow_id'], 'w');
  assert.equal(s.attributes['dbos.application.version'], 'v');
  assert.equal(s.attributes['dbos.executor.id'], 'e');
});

test('DBOS spans reach the OTLP endpoint', async () => {
  // The batch exporter sends within its schedule (5 s by default); shutdown would flush it too.
  await arrived('/v1/traces');
  const body = Buffer.concat(received.get('/v1/traces')!);
  for (const name of ['tracedWorkflow', 'flakyStep', 'tracedChild']) {
    assert.ok(body.includes(Buffer.from(name)), `the export carries the ${name} span`);
  }
});

test("DBOS.logger writes DBOS's line and exports the record over OTLP with its span", async () => {
  const [step] = spansNamed('flakyStep');
  await arrived('/v1/logs');
  const body = Buffer.concat(received.get('/v1/logs')!);
  assert.ok(body.includes(Buffer.from('flaky attempt 1')), 'the record is exported');
  assert.ok(body.includes(Buffer.from(step.spanContext().spanId)), 'with the id of the span it was written in');
  const lines: string[] = [];
  const log = console.log;
  console.log = (line: string) => lines.push(line);
  try {
    DBOS.logger.info('a plain line');
  } finally {
    console.log = log;
  }
  assert.match(lines[0], new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\[version ${DBOS.applicationVersion}\\] \\[info\\]: a plain line $`));
});
