// The values the interop tests and their official program (official-comm.ts)
// pass, send, publish and stream to each other, and what they decode to.

/** A value of the kinds DBOS's default serializer (superjson) carries: Date, Map, Set, bigint, undefined. */
export function richValue() {
  return {
    when: new Date('2026-03-04T05:06:07.089Z'),
    tags: new Map<string, unknown>([
      ['a', 1],
      ['b', new Date(0)],
    ]),
    ids: new Set(['x', 'y']),
    big: 12345678901234567890n,
    nested: { list: [1, 'two', { three: [3, null] }], none: undefined, deep: { deeper: { deepest: true } } },
  };
}

/** A value for portable JSON, which every DBOS SDK reads; its Date is written as its ISO string. */
export function portableValue() {
  return { text: 'héllo ✓', n: 7, ratio: 0.25, flag: true, none: null, list: [1, 'two', { three: 3 }], at: new Date('2026-05-06T07:08:09.010Z') };
}

/** portableValue() as any reader decodes it. */
export function portableDecoded() {
  return { ...portableValue(), at: '2026-05-06T07:08:09.010Z' };
}

/** Whether a decoded richValue() has its kinds back (as superjson, not JSON, decodes it). */
export function richKinds(v: unknown): boolean[] {
  const r = v as ReturnType<typeof richValue> | null;
  return [r?.when instanceof Date, r?.tags instanceof Map, r?.ids instanceof Set, typeof r?.big === 'bigint'];
}
