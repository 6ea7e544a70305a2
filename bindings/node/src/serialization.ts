/**
 * How workflow inputs, outputs, errors, messages, events and stream values
 * become the strings the agent stores, byte for byte as DBOS TypeScript 5.3
 * writes them, so that rows cross between this binding and the official SDK
 * both ways. Every payload travels with a serialization tag:
 *
 * - `js_superjson` (DBOSJSON, DBOS TypeScript's default): superjson's
 *   `{json, meta}` record with DBOS's marker key added,
 *   `{"json":...,"meta":...,"__dbos_serializer":"superjson"}`; a text without
 *   the marker is refused.
 * - `portable_json` (DBOSPortableJSON, readable by every DBOS SDK): plain
 *   JSON; inputs are `{"positionalArgs": [...], "namedArgs": {...}}`, errors
 *   `{"name", "message", "code", "data"}`.
 * - a custom serializer's own name (DBOSConfig.serializer).
 * - none (NULL, rows of older versions): the configured serializer's.
 */
import { deserializeError as reviveSerializedError, serializeError as serializeErrorRecord } from 'serialize-error';
import superjson from 'superjson';
import type { JSONValue, SuperJSONResult, SuperJSONValue } from 'superjson/dist/types';
import { PortableWorkflowError, type JsonValue as PortableJsonValue } from './error';

export type { JSONValue };

/**
 * What DBOSConfig.serializer takes: any value to a string and back. Either
 * side may be async (to encrypt what is stored, say); DBOS awaits both.
 */
export interface DBOSSerializer {
  /** Return a name for the serialization format: the tag written with every value. */
  name: () => string;
  /** Serialize a value to a string (or a Promise of it). */
  stringify(value: unknown): string | Promise<string>;
  /**
   * Deserialize a string back to a value (null if the input was null/undefined).
   * Implementations may return a Promise; DBOS awaits the result.
   */
  parse(text: string | null | undefined): unknown;
}

/** How values of one type cross DBOSJSON: superjson's custom transformer, under a name stored with each value. */
export type SerializationRecipe<T, S extends JSONValue> = {
  name: string;
  isApplicable: (v: unknown) => v is T;
  serialize: (v: T) => S;
  deserialize: (s: S) => T;
};

/** The per-call choice: DBOS's native format, the portable one, or (undefined) the configured serializer. */
export type SerializationFormat = undefined | 'native' | 'portable';

/**
 * Teaches DBOSJSON a type (what DBOS.registerSerialization does). Recipes
 * live in superjson's default instance, as DBOS's do, so one registered by
 * name there is the same recipe here.
 */
export function registerSerializationRecipe<T, S extends JSONValue>(r: SerializationRecipe<T, S>): void {
  superjson.registerCustom<T, S>(r, r.name);
}

// DBOS registers Buffer itself, as bytes in an array of numbers.
registerSerializationRecipe<Buffer, number[]>({
  name: 'Buffer',
  isApplicable: (v): v is Buffer => Buffer.isBuffer(v),
  serialize: (v) => [...v],
  deserialize: (s) => Buffer.from(s),
});

/** The key DBOSJSON adds to superjson's record, so its texts are told apart from any other JSON. */
export const SERIALIZER_MARKER_KEY = '__dbos_serializer';
export const SERIALIZER_MARKER_VALUE = 'superjson';

const JS_SUPERJSON = 'js_superjson';
const PORTABLE_JSON = 'portable_json';

function isMarkedRecord(v: unknown): v is SuperJSONResult {
  return (
    typeof v === 'object' &&
    v !== null &&
    (v as Record<string, unknown>)[SERIALIZER_MARKER_KEY] === SERIALIZER_MARKER_VALUE &&
    'json' in v
  );
}

/** DBOS TypeScript's default serializer (`js_superjson`). */
export const DBOSJSON: {
  name: () => string;
  parse: (text: string | null | undefined) => unknown;
  stringify: (value: unknown) => string;
} = {
  name: () => JS_SUPERJSON,
  parse: (text: string | null | undefined): unknown => {
    if (text === null || text === undefined) return null;
    const record: unknown = JSON.parse(text);
    if (!isMarkedRecord(record)) {
      throw new TypeError(
        `Value carries no ${SERIALIZER_MARKER_VALUE} marker, so it was not written by this serializer`,
      );
    }
    return superjson.deserialize(record);
  },
  stringify: (value: unknown): string => {
    const record = superjson.serialize(value as SuperJSONValue);
    return JSON.stringify({ ...record, [SERIALIZER_MARKER_KEY]: SERIALIZER_MARKER_VALUE });
  },
};

// What portable JSON makes of JavaScript's own types; JSON.stringify does the rest
// (NaN and the infinities become null, undefined is dropped from objects).
function portableReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'bigint') return value.toString(10);
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const k of value.keys()) {
      if (typeof k !== 'string') {
        throw new TypeError(`Attempt to do portable JSON serialization of a map with non-string keys`);
      }
    }
    for (const [k, v] of value as Map<string, unknown>) out[k] = v;
    return out;
  }
  if (value instanceof Set) return [...value];
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

/** The serializer every DBOS SDK can read and write (`portable_json`): plain JSON. */
export const DBOSPortableJSON: {
  name: () => string;
  parse: (text: string | null) => unknown;
  stringify: (value: unknown) => string;
} = {
  name: () => PORTABLE_JSON,
  parse: (text: string | null): unknown => (text === null || text === undefined ? null : JSON.parse(text)),
  stringify: (value: unknown): string => JSON.stringify(value ?? null, portableReplacer),
};

/** A payload as the agent stores it: the text (null: none) and its tag. */
export interface SerializedPayload {
  value: string | null;
  serialization: string;
}

/** The tag a value is written with: the call's explicit format, else the configured serializer's. */
export function serializationFor(format: SerializationFormat, ser: DBOSSerializer): string {
  if (format === 'portable') return PORTABLE_JSON;
  if (format === 'native') return JS_SUPERJSON;
  return ser.name();
}

/** A value (a message, an event, a stream value) as DBOS writes it for the format. */
export async function serializeValue(
  v: unknown,
  ser: DBOSSerializer,
  format?: SerializationFormat,
): Promise<SerializedPayload> {
  if (format === 'portable') return { value: DBOSPortableJSON.stringify(v), serialization: PORTABLE_JSON };
  if (format === 'native') return { value: DBOSJSON.stringify(v), serialization: JS_SUPERJSON };
  return { value: await ser.stringify(v), serialization: ser.name() };
}

/**
 * A workflow's arguments as DBOS writes them: the array itself, or for
 * portable JSON `{"positionalArgs": [...]}` (with `namedArgs` when given; DBOS
 * takes named arguments only in portable JSON).
 */
export async function serializeArgs(
  args: unknown[],
  ser: DBOSSerializer,
  format?: SerializationFormat,
  namedArgs?: Record<string, unknown>,
): Promise<SerializedPayload> {
  if (format === 'portable') {
    return { value: DBOSPortableJSON.stringify({ positionalArgs: args, namedArgs }), serialization: PORTABLE_JSON };
  }
  if (namedArgs) {
    throw new TypeError(`Serialization format '${format}' does not currently support named args.`);
  }
  return serializeValue(args, ser, format);
}

/** Reads a payload of any tag DBOS reads; an unknown tag is a TypeError naming it. */
export async function deserializeValue(
  value: string | null,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<unknown> {
  if (serialization === PORTABLE_JSON) return DBOSPortableJSON.parse(value);
  if (serialization === JS_SUPERJSON) return DBOSJSON.parse(value);
  // A row without a tag was written by the configured serializer.
  if (!serialization || serialization === ser.name()) return await ser.parse(value);
  throw new TypeError(`Value deserialization type ${serialization} is not available`);
}

/**
 * A workflow's arguments: the positional ones (portable JSON's `namedArgs`
 * are not passed, as in DBOS). No inputs at all are no arguments.
 */
export async function deserializeArgs(
  value: string | null,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<unknown[]> {
  const parsed = await deserializeValue(value, serialization, ser);
  const args =
    serialization === PORTABLE_JSON && parsed !== null && typeof parsed === 'object'
      ? (parsed as { positionalArgs?: unknown }).positionalArgs
      : parsed;
  if (args === null || args === undefined) return [];
  if (!Array.isArray(args)) {
    throw new TypeError(`Workflow inputs (${serialization ?? ser.name()}) are not an array of arguments`);
  }
  return args;
}

// ---------------------------------------------------------------------------
// Errors. The native form is serialize-error's record of the error with its
// cause chain (and AggregateError's errors), which serialize-error alone
// skips because they are not enumerable; the portable form is a
// language-neutral record.

type ErrorRecord = Record<string, unknown>;

function recordOf(value: unknown, ancestors: Set<unknown> = new Set()): unknown {
  if (!(value instanceof Error)) return serializeErrorRecord(value);
  if (ancestors.has(value)) return '[Circular]';
  const record = serializeErrorRecord(value);
  if (typeof record === 'object' && record !== null) addNested(record as ErrorRecord, value, ancestors);
  return record;
}

// An enumerable `errors` array (DBOSMaxStepRetriesError's) was copied by
// serialize-error: its Error entries gain their causes in place.
function addNested(record: ErrorRecord, err: Error, ancestors: Set<unknown>): void {
  ancestors.add(err);
  if (err.cause !== undefined) record['cause'] = recordOf(err.cause, ancestors);
  const errors = (err as { errors?: unknown }).errors;
  if (Array.isArray(errors)) {
    const copied = record['errors'];
    if (Array.isArray(copied)) {
      errors.forEach((sub: unknown, i) => {
        const entry: unknown = copied[i];
        if (sub instanceof Error && !ancestors.has(sub) && typeof entry === 'object' && entry !== null) {
          addNested(entry as ErrorRecord, sub, ancestors);
        }
      });
    } else if (err instanceof AggregateError) {
      record['errors'] = errors.map((sub: unknown) => recordOf(sub, ancestors));
    }
  }
  ancestors.delete(err);
}

function looksLikeErrorRecord(v: unknown): v is ErrorRecord {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const r = v as ErrorRecord;
  return typeof r['message'] === 'string' || typeof r['name'] === 'string';
}

function setHidden(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: false, writable: true, configurable: true });
}

function errorOf(record: unknown): Error {
  const err = reviveSerializedError(record);
  if (!(record instanceof Error) && looksLikeErrorRecord(record)) reviveNested(err, record);
  return err;
}

function reviveEntry(v: unknown): unknown {
  return looksLikeErrorRecord(v) ? errorOf(v) : v;
}

// Outside AggregateError, `errors` entries stay the plain records serialize-error
// makes of them, and only gain their causes.
function reviveNested(target: object, record: ErrorRecord): void {
  if (record['cause'] !== undefined) setHidden(target, 'cause', reviveEntry(record['cause']));
  const raw = record['errors'];
  if (!Array.isArray(raw)) return;
  if (record['name'] === 'AggregateError') {
    setHidden(target, 'errors', raw.map(reviveEntry));
    return;
  }
  const revived = (target as { errors?: unknown }).errors;
  if (!Array.isArray(revived)) return;
  raw.forEach((sub: unknown, i) => {
    const entry: unknown = revived[i];
    if (looksLikeErrorRecord(sub) && typeof entry === 'object' && entry !== null) reviveNested(entry, sub);
  });
}

function portableErrorText(e: unknown): string {
  const err = (typeof e === 'object' && e !== null ? e : {}) as Record<string, unknown>;
  return DBOSPortableJSON.stringify({ name: err['name'], message: err['message'], code: err['code'], data: err['data'] });
}

/**
 * An error (a step's, a workflow's, or anything thrown) as DBOS writes it
 * under the tag: portable JSON's record, else the serializer's text of
 * serialize-error's record with the cause chain. A null tag is the
 * configured serializer's.
 */
export async function serializeErrorAs(
  e: unknown,
  ser: DBOSSerializer,
  serialization: string | null,
): Promise<SerializedPayload> {
  if (serialization === PORTABLE_JSON) return { value: portableErrorText(e), serialization: PORTABLE_JSON };
  if (serialization === JS_SUPERJSON) return { value: DBOSJSON.stringify(recordOf(e)), serialization: JS_SUPERJSON };
  return { value: await ser.stringify(recordOf(e)), serialization: ser.name() };
}

/** An error as DBOS writes it for the format (a step's error: the configured serializer's). */
export async function serializeError(
  e: unknown,
  ser: DBOSSerializer,
  format?: SerializationFormat,
): Promise<SerializedPayload> {
  return serializeErrorAs(e, ser, serializationFor(format, ser));
}

/**
 * A recorded error, revived as DBOS revives it: an Error with the recorded
 * name, message, stack, cause chain and other fields (DBOS restores no
 * classes: a DBOSError comes back a plain Error with its `dbosErrorCode`),
 * or for portable JSON a PortableWorkflowError with name, message, code and
 * data.
 */
export async function deserializeError(
  value: string | null,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<Error> {
  const parsed = await deserializeValue(value, serialization, ser);
  if (serialization === PORTABLE_JSON) {
    const r = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
    return new PortableWorkflowError(
      r['message'] as string,
      r['name'] as string,
      r['code'] as string | number | undefined,
      r['data'] as PortableJsonValue | undefined,
    );
  }
  return errorOf(parsed);
}

// ---------------------------------------------------------------------------
// Best-effort reads for listings, as DBOS's introspection does: what cannot be
// read comes back as its raw text.

/** The value, or the raw text if it cannot be read. */
export async function safeDeserializeValue(
  value: string | null,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<unknown> {
  try {
    return await deserializeValue(value, serialization, ser);
  } catch {
    return value;
  }
}

/** The positional arguments, or the raw text if they cannot be read. */
export async function safeDeserializeArgs(
  value: string | null,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<unknown[] | string | null> {
  try {
    return await deserializeArgs(value, serialization, ser);
  } catch {
    return value;
  }
}

/**
 * The error, or an Error whose message is the raw text if it cannot be read.
 * As in DBOS's listings, a portable error is such a raw-text Error too (DBOS
 * throws the portable error from its reader, and the listing catches it).
 */
export async function safeDeserializeError(
  value: string,
  serialization: string | null,
  ser: DBOSSerializer,
): Promise<Error> {
  if (serialization === PORTABLE_JSON) return new Error(value);
  try {
    return await deserializeError(value, serialization, ser);
  } catch {
    return new Error(value);
  }
}

// ---------------------------------------------------------------------------
// Round trips. DBOS hands a workflow its arguments, and a caller a step's or
// workflow's result, as they come back from serialization, not the original
// objects, so the first run behaves as a replay will. Functions do not cross:
// where the original had one, the copy gets a stub that throws saying so.

type PathSegment = string | number | symbol;

/** A value written and read back: the text, its tag and the copy. */
export interface RoundTrip<T> extends SerializedPayload {
  value: string;
  revived: T;
}

/**
 * Writes `v` under the tag (null: the configured serializer's) and reads it
 * back, as DBOS does with workflow inputs and outputs and step outputs. A
 * tag other than the built-in ones and the serializer's own is a TypeError.
 */
export async function roundTripAs<T>(
  v: T,
  ser: DBOSSerializer,
  serialization: string | null,
  path: PathSegment[] = [],
): Promise<RoundTrip<T>> {
  for (const builtin of [DBOSPortableJSON, DBOSJSON]) {
    if (serialization === builtin.name()) {
      const text = builtin.stringify(v);
      const revived = builtin.parse(text) as T;
      if (isObjectish(revived)) attachFunctionStubs(v, revived, path);
      return { value: text, serialization: builtin.name(), revived };
    }
  }
  const name = ser.name();
  if (serialization && serialization !== name) {
    throw new TypeError(
      `Serializer provided (${name}) is not compatible with the required serialization (${serialization})`,
    );
  }
  const text = await ser.stringify(v);
  const revived = (await ser.parse(text)) as T;
  if (name === JS_SUPERJSON && isObjectish(revived)) attachFunctionStubs(v, revived, path);
  return { value: text, serialization: name, revived };
}

/** roundTripAs for a call's format (undefined: the configured serializer). */
export async function roundTrip<T>(
  v: T,
  ser: DBOSSerializer,
  format?: SerializationFormat,
  path: PathSegment[] = [],
): Promise<RoundTrip<T>> {
  return roundTripAs(v, ser, serializationFor(format, ser), path);
}

/**
 * A workflow's arguments written and read back, as DBOS starts a workflow:
 * for portable JSON the record `{"positionalArgs": [...]}`, and the workflow
 * is handed its arguments as portable JSON reads them (dates as strings).
 */
export async function roundTripArgs(
  args: unknown[],
  ser: DBOSSerializer,
  format?: SerializationFormat,
  path: PathSegment[] = [],
): Promise<RoundTrip<unknown[]>> {
  if (format !== 'portable') return roundTrip(args, ser, format, path);
  const rt = await roundTrip<{ positionalArgs: unknown[] }>({ positionalArgs: args }, ser, format, path);
  return { value: rt.value, serialization: rt.serialization, revived: rt.revived.positionalArgs };
}

function isObjectish(v: unknown): v is object {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}

function ownKeys(o: object): PathSegment[] {
  return [...Object.getOwnPropertyNames(o), ...Object.getOwnPropertySymbols(o)];
}

// The function-valued own properties and prototype methods of `o`.
function functionKeys(o: object): PathSegment[] {
  const keys = new Set<PathSegment>();
  for (const k of ownKeys(o)) {
    const d = Object.getOwnPropertyDescriptor(o, k);
    if (d && 'value' in d && typeof d.value === 'function') keys.add(k);
  }
  for (let proto: unknown = Object.getPrototypeOf(o); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const k of Object.getOwnPropertyNames(proto)) {
      if (k === 'constructor') continue;
      const d = Object.getOwnPropertyDescriptor(proto, k);
      if (d && 'value' in d && typeof d.value === 'function') keys.add(k);
    }
  }
  return [...keys];
}

const opaque = [Date, RegExp, WeakMap, WeakSet, ArrayBuffer, DataView];

function descend(a: unknown, b: unknown): boolean {
  if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return false;
  return !opaque.some((t) => a instanceof t);
}

function describePath(path: PathSegment[]): string {
  if (path.length === 0) return '(root)';
  const parts = path.map((seg) => {
    if (typeof seg === 'number') return `[${seg}]`;
    if (typeof seg === 'symbol') return `[${String(seg)}]`;
    return /^<?[A-Za-z_$][A-Za-z0-9_$]*>?$/.test(seg) ? `.${seg}` : `[${JSON.stringify(seg)}]`;
  });
  return parts.join('').replace(/^\./, '');
}

function stubFor(target: object, key: PathSegment, path: PathSegment[]): void {
  const stub = function (): never {
    throw new Error(
      `Attempted to call '${String(key)}' at path ${describePath(path)} on an object that is a serialized function input our output value. ` +
        `Functions are not preserved through serialization; see 'DBOS.registerSerialization'. `,
    );
  };
  try {
    Object.defineProperty(target, key, { value: stub, configurable: true, writable: false, enumerable: false });
  } catch {
    (target as Record<PathSegment, unknown>)[key] = stub;
  }
}

// Walks the original and its copy together, stubbing the functions the copy lost.
function attachFunctionStubs(original: unknown, copy: unknown, path: PathSegment[]): void {
  const seen = new WeakSet<object>();
  const pending: { o: object; c: object; p: PathSegment[] }[] = [{ o: original as object, c: copy as object, p: path }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { o, c, p } = next;
    if (seen.has(o)) continue;
    seen.add(o);
    for (const k of functionKeys(o)) {
      if (!(k in c)) stubFor(c, k, p);
    }
    for (const k of ownKeys(o)) {
      try {
        const childO: unknown = (o as Record<PathSegment, unknown>)[k];
        const childC: unknown = (c as Record<PathSegment, unknown>)[k];
        if (descend(childO, childC)) pending.push({ o: childO as object, c: childC as object, p: [...p, k] });
      } catch {
        // A getter that throws is skipped.
      }
    }
    if (o instanceof Map && c instanceof Map) {
      for (const [k, vO] of o) {
        const vC: unknown = c.get(k);
        if (descend(vO, vC)) {
          const step = typeof k === 'string' || typeof k === 'number' ? String(k) : '[MapValue]';
          pending.push({ o: vO as object, c: vC as object, p: [...p, step] });
        }
      }
    }
    if (o instanceof Set && c instanceof Set) {
      const as = [...o];
      const cs = [...c];
      for (let i = 0; i < Math.min(as.length, cs.length); i++) {
        if (descend(as[i], cs[i])) pending.push({ o: as[i] as object, c: cs[i] as object, p: [...p, i] });
      }
    }
  }
}
