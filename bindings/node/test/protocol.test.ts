/**
 * The binding's codec against the protocol's golden vectors
 * (protocol/testdata/vectors.json): every frame is decoded and compared with
 * its JSON rendering, and encoded again and compared with its bytes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FrameReader, decodeEnvelope, encodeFrame, Envelope } from '../src/protocol';
import { REPO } from './harness';

interface Vector {
  name: string;
  kind: number;
  id: number;
  op?: string;
  hex: string;
  body?: unknown;
  error?: unknown;
  decode_only?: boolean;
  canonical_hex?: string;
}

/** A float of the JSON rendering ("2.0"): msgpack float64 on the wire, which JSON.parse cannot tell from 2. */
class Float {
  constructor(readonly value: number) {}
}

/** JSON.parse that keeps floats apart from integers, and object keys in order. */
function parseKeepingFloats(text: string): unknown {
  let at = 0;
  const ws = () => {
    while (/\s/.test(text[at])) at++;
  };
  const value = (): unknown => {
    ws();
    const c = text[at];
    if (c === '{') {
      at++;
      const obj: Record<string, unknown> = {};
      ws();
      if (text[at] === '}') {
        at++;
        return obj;
      }
      for (;;) {
        ws();
        const k = value() as string;
        ws();
        at++; // :
        obj[k] = value();
        ws();
        if (text[at++] === '}') return obj;
      }
    }
    if (c === '[') {
      at++;
      const arr: unknown[] = [];
      ws();
      if (text[at] === ']') {
        at++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        ws();
        if (text[at++] === ']') return arr;
      }
    }
    if (c === '"') {
      const start = at;
      at++;
      while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
      at++;
      return JSON.parse(text.slice(start, at));
    }
    const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?|^true|^false|^null/.exec(text.slice(at))!;
    at += m[0].length;
    if (m[0] === 'true') return true;
    if (m[0] === 'false') return false;
    if (m[0] === 'null') return null;
    return m[1] !== undefined || m[2] !== undefined ? new Float(Number(m[0])) : Number(m[0]);
  };
  return value();
}

function plain(v: unknown): unknown {
  if (v instanceof Float) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

function hasIntegralFloat(v: unknown): boolean {
  if (v instanceof Float) return Number.isInteger(v.value);
  if (Array.isArray(v)) return v.some(hasIntegralFloat);
  if (v && typeof v === 'object') return Object.values(v).some(hasIntegralFloat);
  return false;
}

/** Field names some vector writes in its canonical form: a dropped one must be nil, not known. */
const KNOWN_FIELDS = new Set<string>();

const raw = readFileSync(join(REPO, 'protocol', 'testdata', 'vectors.json'), 'utf8');
const vectors = parseKeepingFloats(raw) as Vector[];
for (const v of vectors) {
  if (!v.decode_only && v.body && typeof v.body === 'object') for (const k of Object.keys(v.body)) KNOWN_FIELDS.add(k);
}

test('the vectors file has frames of every kind', () => {
  assert.ok(vectors.length > 100);
  for (const kind of [1, 2, 3]) assert.ok(vectors.some((v) => v.kind === kind), `a vector of kind ${kind}`);
});

for (const v of vectors) {
  test(`vector ${v.name}`, () => {
    const bytes = Buffer.from(v.hex, 'hex');
    // Fed one byte at a time, the reader gives the one frame at its end.
    const reader = new FrameReader();
    const bodies: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i++) bodies.push(...reader.push(bytes.subarray(i, i + 1)));
    assert.equal(bodies.length, 1);
    const env = decodeEnvelope(bodies[0]);
    assert.equal(env.kind, v.kind);
    assert.equal(env.id, v.id);
    if (v.op !== undefined && v.kind !== 2) assert.equal(env.op, v.op);
    assert.deepEqual(env.body, plain(v.body));
    if (v.error !== undefined) assert.deepEqual(env.error, plain(v.error));

    const canonical = Buffer.from(v.canonical_hex ?? v.hex, 'hex');
    let body = plain(v.body) as Record<string, unknown> | undefined;
    if (v.decode_only) {
      // A frame the agent reads but never writes (unknown fields, nil for
      // absent, wide integers): what the binding keeps of it is the message
      // the canonical frame holds, and encoding that gives the canonical bytes.
      const kept = decodeEnvelope(canonical.subarray(4)).body ?? {};
      for (const [k, x] of Object.entries(kept)) assert.deepEqual(env.body?.[k], x, `field ${k}`);
      for (const k of Object.keys(env.body ?? {})) {
        if (!(k in kept)) assert.ok(env.body![k] === null || !KNOWN_FIELDS.has(k), `dropped field ${k} is unknown or nil`);
      }
      body = kept;
    }
    const again: Envelope = { kind: v.kind, id: v.id, op: v.kind === 2 ? undefined : v.op, body, error: plain(v.error) as Envelope['error'] };
    const encoded = Buffer.from(encodeFrame(again));
    if (hasIntegralFloat(v.body)) {
      // JavaScript has one number type: an integral float goes out as an
      // integer, which the agent reads in every float field (PROTOCOL.md
      // section 5). The bytes differ there only; the frame reads back the same.
      assert.deepEqual(decodeEnvelope(encoded.subarray(4)), decodeEnvelope(canonical.subarray(4)));
    } else {
      assert.equal(encoded.toString('hex'), canonical.toString('hex'));
    }
  });
}
