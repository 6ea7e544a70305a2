/**
 * The agent's wire protocol (protocol/PROTOCOL.md): frames, the envelope,
 * and the constants a binding branches on. Nothing here knows workflows.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';

export const PROTOCOL_VERSION = 1;

/** The hello's wake_time_format of this binding: the agent records a durable sleep's wake time
 * (and a wait's deadline) as DBOS TypeScript writes and reads it, integer epoch ms, so that the
 * official SDK recovers what this binding's workflows slept (section 2.18). */
export const WAKE_TIME_FORMAT = 'epoch_ms';

export const KIND_REQUEST = 1;
export const KIND_RESPONSE = 2;
export const KIND_PUSH = 3;

/** The frame size the agent accepts before its hello reply says otherwise (section 3). */
export const DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024;
/** Frames the agent sends are unbounded by max_frame_size (a run carries its history); this
 * reader refuses more than the Go client does, so a garbled length cannot take all memory. */
export const MAX_INBOUND_FRAME = 1024 * 1024 * 1024;

/** The catalog's codes this binding branches on (testdata/error_codes.json has them all). */
export const Code = {
  internal: 100,
  malformed_frame: 101,
  frame_too_large: 102,
  unknown_op: 103,
  invalid_argument: 104,
  version_mismatch: 105,
  handshake_needed: 106,
  shutting_down: 107,
  database_unavailable: 108,
  not_registered: 109,
  permission_denied: 110,
  request_cancelled: 111,
  resource_exhausted: 112,
  workflow_not_found: 200,
  workflow_conflict: 201,
  deduplicated: 202,
  fenced: 203,
  workflow_cancelled: 204,
  unexpected_step: 205,
  step_conflict: 206,
  timeout: 207,
  max_recovery_attempts_exceeded: 208,
  stream_closed: 209,
  workflow_active: 210,
  workflow_id_in_use: 211,
} as const;

/** An id-0 error with one of these codes means the agent closes the connection (section 4). */
export const CLOSING_CODES: ReadonlySet<number> = new Set([
  Code.frame_too_large,
  Code.version_mismatch,
  Code.permission_denied,
  Code.resource_exhausted,
]);

/** An `Error` of the envelope (section 10). */
export interface WireError {
  code: number;
  name: string;
  message: string;
  data?: Record<string, unknown>;
}

export interface Envelope {
  kind: number;
  id: number;
  op?: string;
  body?: Record<string, unknown>;
  error?: WireError | null;
}

// One encoder for the process: it reuses its buffer between frames.
// Undefined fields are left out: an absent optional field is the default
// (section 5), and the agent refuses nil where it wants a value.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

/** A whole frame: the 4-byte big-endian length, then the envelope in msgpack. */
export function encodeFrame(env: Envelope): Uint8Array {
  const body = encoder.encode({ kind: env.kind, id: env.id, op: env.op, body: env.body, error: env.error ?? undefined });
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length, false);
  frame.set(body, 4);
  return frame;
}

/** The encoded size of a body, for the local check against max_frame_size. */
export function frameLength(frame: Uint8Array): number {
  return frame.length - 4;
}

export function decodeEnvelope(body: Uint8Array): Envelope {
  const value = decoder.decode(body) as unknown;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('dbos-agent sent a frame that is not an envelope');
  }
  const env = value as Record<string, unknown>;
  if (typeof env.kind !== 'number' || typeof env.id !== 'number') {
    throw new Error('dbos-agent sent an envelope without kind or id');
  }
  return env as unknown as Envelope;
}

/**
 * Splits a byte stream into frame bodies. Holds at most one partial frame;
 * a length past `limit` is an error (the stream cannot be resynchronised).
 */
export class FrameReader {
  private chunks: Uint8Array[] = [];
  private buffered = 0;

  constructor(private readonly limit: number = MAX_INBOUND_FRAME) {}

  /** Feeds bytes; returns the bodies of the frames they complete, in order. */
  push(chunk: Uint8Array): Uint8Array[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Uint8Array[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const length = new DataView(head.buffer, head.byteOffset, 4).getUint32(0, false);
      if (length > this.limit) {
        throw new Error(`dbos-agent announced a frame of ${length} bytes (at most ${this.limit} are read)`);
      }
      if (this.buffered < 4 + length) break;
      const frame = this.take(4 + length);
      out.push(frame.subarray(4));
    }
    return out;
  }

  private peek(n: number): Uint8Array {
    if (this.chunks[0].length >= n) return this.chunks[0];
    return this.flatten();
  }

  private take(n: number): Uint8Array {
    let first = this.chunks[0];
    if (first.length < n) first = this.flatten();
    const frame = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return frame;
  }

  private flatten(): Uint8Array {
    const all = new Uint8Array(this.buffered);
    let at = 0;
    for (const c of this.chunks) {
      all.set(c, at);
      at += c.length;
    }
    this.chunks = [all];
    return all;
  }
}

/** An error answer of the agent, as it came (the API layer maps it to DBOS's classes). */
export class AgentErrorReply extends Error {
  readonly code: number;
  readonly codeName: string;
  readonly data?: Record<string, unknown>;

  constructor(
    readonly wire: WireError,
    readonly op: string,
  ) {
    super(wire.message);
    this.name = 'AgentErrorReply';
    this.code = wire.code;
    this.codeName = wire.name;
    this.data = wire.data;
  }
}
