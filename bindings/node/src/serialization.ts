// TEMPORARY (not committed): stand-in until the serde branch lands.
export interface DBOSSerializer { name(): string; stringify(v: unknown): string | Promise<string>; parse(t: string | null | undefined): unknown }
export type SerializationRecipe<T, S> = { name: string; isApplicable: (v: unknown) => v is T; serialize: (v: T) => S; deserialize: (s: S) => T };
export function registerSerializationRecipe<T, S>(_r: SerializationRecipe<T, S>): void {}
export const DBOSJSON: DBOSSerializer = { name: () => 'js_superjson', stringify: (v) => JSON.stringify(v === undefined ? null : v), parse: (t) => (t == null ? undefined : JSON.parse(t)) };
export const DBOSPortableJSON: DBOSSerializer = { name: () => 'portable_json', stringify: (v) => JSON.stringify(v), parse: (t) => (t == null ? null : JSON.parse(t)) };
export async function serializeArgs(a: unknown[], s: DBOSSerializer, _f?: string) { return { value: await s.stringify(a), serialization: s.name() }; }
export async function deserializeArgs(v: string | null, _t: string | null, s: DBOSSerializer) { return (v == null ? [] : s.parse(v)) as unknown[]; }
export async function serializeValue(v: unknown, s: DBOSSerializer, _f?: string) { const t = _f === 'portable' ? DBOSPortableJSON : s; return { value: v === undefined ? null : await t.stringify(v), serialization: t.name() }; }
export async function deserializeValue(v: string | null, _t: string | null, s: DBOSSerializer) { return v == null ? undefined : (_t === 'portable_json' ? DBOSPortableJSON : s).parse(v); }
export async function serializeError(e: unknown, _s: DBOSSerializer, _f?: string) { const x = e as Error; return { value: JSON.stringify({ name: x?.name, message: x?.message }), serialization: 'js_superjson' }; }
export async function deserializeError(v: string | null, _t: string | null, _s: DBOSSerializer) { const o = JSON.parse(v ?? '{}'); const e = new Error(o.message); e.name = o.name; return e; }
