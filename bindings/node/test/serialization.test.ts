// The binding's serializers against the official SDK's, both ways: for every
// value, what we write is what DBOS TypeScript 5.3 writes (to the byte where
// the same call must give the same text), it reads ours to an equal value,
// and we read its.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  DBOSJSON,
  DBOSPortableJSON,
  DBOSSerializer,
  SERIALIZER_MARKER_KEY,
  SERIALIZER_MARKER_VALUE,
  deserializeArgs,
  deserializeError,
  deserializeValue,
  registerSerializationRecipe,
  roundTrip,
  roundTripArgs,
  roundTripAs,
  safeDeserializeArgs,
  safeDeserializeError,
  safeDeserializeValue,
  serializeArgs,
  serializeError,
  serializeErrorAs,
  serializeValue,
  serializationFor,
} from '../src/serialization';
import { DBOSMaxStepRetriesError, DBOSQueueDuplicatedError, DBOSWorkflowIDInUseError, PortableWorkflowError } from '../src/error';
import { officialErrors, officialSchema, officialSerialization as official } from './official';

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
  norm(): number {
    return Math.hypot(this.x, this.y);
  }
}

const pointRecipe = {
  name: 'test.Point',
  isApplicable: (v: unknown): v is Point => v instanceof Point,
  serialize: (p: Point) => ({ x: p.x, y: p.y }),
  deserialize: (s: { x: number; y: number }) => new Point(s.x, s.y),
};
// Through both APIs: each must find it whichever superjson instance it uses.
registerSerializationRecipe(pointRecipe);
official.registerSerializationRecipe(pointRecipe);

function withCause(): Error {
  const root = new RangeError('root cause');
  const mid = new TypeError('middle', { cause: root });
  const top = new Error('top', { cause: mid });
  (top as Error & { code: string }).code = 'E_TOP';
  return top;
}

// Values that cross DBOSJSON unchanged (as superjson keeps them).
const nativeValues: [string, unknown][] = [
  ['string', 'hello, wörld ✓'],
  ['empty string', ''],
  ['integer', 42],
  ['float', -3.25],
  ['negative zero', -0],
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['true', true],
  ['null', null],
  ['undefined', undefined],
  ['bigint', 12345678901234567890123n],
  ['negative bigint', -7n],
  ['Date', new Date('2024-02-29T12:34:56.789Z')],
  ['Map', new Map<unknown, unknown>([[1, 'one'], ['two', new Date(0)], [{ k: 1 }, [1n]]])],
  ['Set', new Set([1, 'a', 3n])],
  ['RegExp', /a+b*[c-d]/gi],
  ['Buffer', Buffer.from([0, 1, 2, 253, 254, 255])],
  ['array with undefined', [1, undefined, 'x', undefined]],
  ['object with undefined', { a: undefined, b: 1, c: { d: undefined } }],
  ['empty array', []],
  ['empty object', {}],
  ['the positional arguments of a call', ['order-1', 3, { rush: true }]],
  [
    'nested',
    {
      list: [new Map([['k', new Set([new Date(86_400_000)])]]), { big: 1n, nan: NaN, negz: -0 }],
      deep: { deeper: { deepest: [undefined, null, /x/] } },
    },
  ],
  ['class instance with a recipe', new Point(3, 4)],
  ['recipes inside containers', { points: [new Point(1, 2), new Point(-1, 0.5)], byName: new Map([['o', new Point(0, 0)]]) }],
  ['shared references', (() => { const shared = { n: 1 }; return { a: shared, b: [shared] }; })()],
  ['an object holding the marker key as data', { [SERIALIZER_MARKER_KEY]: 'not ours', json: 1 }],
];

describe('DBOSJSON (js_superjson)', () => {
  test('names itself as DBOS does, with its marker', () => {
    assert.equal(DBOSJSON.name(), official.DBOSJSON.name());
    assert.equal(DBOSJSON.name(), 'js_superjson');
    assert.equal(SERIALIZER_MARKER_KEY, official.SERIALIZER_MARKER_KEY);
    assert.equal(SERIALIZER_MARKER_VALUE, official.SERIALIZER_MARKER_VALUE);
  });

  for (const [label, value] of nativeValues) {
    test(`${label}: same text as DBOS, and each side reads the other's`, () => {
      const ours = DBOSJSON.stringify(value);
      const theirs = official.DBOSJSON.stringify(value);
      assert.equal(ours, theirs);
      const record = JSON.parse(ours) as Record<string, unknown>;
      assert.equal(record[SERIALIZER_MARKER_KEY], SERIALIZER_MARKER_VALUE);
      assert.ok('json' in record);
      assert.deepStrictEqual(official.DBOSJSON.parse(ours), value);
      assert.deepStrictEqual(DBOSJSON.parse(theirs), value);
    });
  }

  test('the exact form: superjson record plus the marker', () => {
    assert.equal(DBOSJSON.stringify('hi'), '{"json":"hi","__dbos_serializer":"superjson"}');
    assert.equal(DBOSJSON.stringify([1, undefined]), '{"json":[1,null],"meta":{"values":{"1":["undefined"]}},"__dbos_serializer":"superjson"}');
    assert.equal(DBOSJSON.stringify(new Date(0)), '{"json":"1970-01-01T00:00:00.000Z","meta":{"values":["Date"]},"__dbos_serializer":"superjson"}');
  });

  test('an invalid Date is written as DBOS writes it, and read back as null on both sides (superjson\'s way)', () => {
    const ours = DBOSJSON.stringify(new Date(NaN));
    assert.equal(ours, official.DBOSJSON.stringify(new Date(NaN)));
    assert.equal(DBOSJSON.parse(ours), null);
    assert.equal(official.DBOSJSON.parse(ours), null);
  });

  test('a recipe value comes back as its class', () => {
    const back = DBOSJSON.parse(official.DBOSJSON.stringify({ p: new Point(3, 4) })) as { p: Point };
    assert.ok(back.p instanceof Point);
    assert.equal(back.p.norm(), 5);
  });

  test('an Error inside a value crosses as superjson keeps it (name and message)', () => {
    const v = { failure: withCause() };
    const ours = DBOSJSON.stringify(v);
    assert.equal(ours, official.DBOSJSON.stringify(v));
    const back = DBOSJSON.parse(ours) as { failure: Error };
    const theirs = official.DBOSJSON.parse(ours) as { failure: Error };
    assert.ok(back.failure instanceof Error);
    assert.equal(back.failure.message, 'top');
    assert.equal(back.failure.name, 'Error');
    assert.equal(theirs.failure.message, back.failure.message);
  });

  test('null text is null; text without the marker is refused as DBOS refuses it', () => {
    assert.equal(DBOSJSON.parse(null), null);
    assert.equal(DBOSJSON.parse(undefined), null);
    for (const text of ['{"a":1}', '[1,2]', '"x"', '{"json":1}', '{"__dbos_serializer":"superjson"}']) {
      assert.throws(() => official.DBOSJSON.parse(text), TypeError);
      assert.throws(
        () => DBOSJSON.parse(text),
        (e: unknown) => e instanceof TypeError && e.message === 'Value carries no superjson marker, so it was not written by this serializer',
      );
    }
    assert.throws(() => DBOSJSON.parse('not json'), SyntaxError);
  });
});

// Values as portable JSON writes them: [label, value, what a reader gets back].
const portableValues: [string, unknown, unknown][] = [
  ['string', 'hello', 'hello'],
  ['number', 1.5, 1.5],
  ['negative zero', -0, 0],
  ['NaN', NaN, null],
  ['Infinity', Infinity, null],
  ['null', null, null],
  ['undefined', undefined, null],
  ['bigint', 12345678901234567890n, '12345678901234567890'],
  ['Date', new Date('2024-02-29T12:34:56.789Z'), '2024-02-29T12:34:56.789Z'],
  ['invalid Date', new Date(NaN), null],
  ['Map with string keys', new Map<string, unknown>([['a', 1], ['b', new Date(0)]]), { a: 1, b: '1970-01-01T00:00:00.000Z' }],
  ['Set', new Set([1, 'two']), [1, 'two']],
  ['Error', new TypeError('bad'), { name: 'TypeError', message: 'bad' }],
  ['array with undefined', [1, undefined, NaN], [1, null, null]],
  ['object with undefined', { a: undefined, b: 2 }, { b: 2 }],
  [
    'nested',
    { when: [new Date(1000)], tags: new Set(['x']), m: new Map([['k', 5n]]) },
    { when: ['1970-01-01T00:00:01.000Z'], tags: ['x'], m: { k: '5' } },
  ],
];

describe('DBOSPortableJSON (portable_json)', () => {
  test('names itself as DBOS does', () => {
    assert.equal(DBOSPortableJSON.name(), official.DBOSPortableJSON.name());
    assert.equal(DBOSPortableJSON.name(), 'portable_json');
  });

  for (const [label, value, expected] of portableValues) {
    test(`${label}: same text as DBOS, read back as plain JSON`, () => {
      const ours = DBOSPortableJSON.stringify(value);
      assert.equal(ours, official.DBOSPortableJSON.stringify(value));
      assert.deepStrictEqual(DBOSPortableJSON.parse(ours), expected);
      assert.deepStrictEqual(official.DBOSPortableJSON.parse(ours), expected);
      assert.deepStrictEqual(DBOSPortableJSON.parse(official.DBOSPortableJSON.stringify(value)), expected);
    });
  }

  test('a Map with a non-string key is refused, as DBOS refuses it', () => {
    const v = new Map<unknown, unknown>([[1, 'x']]);
    assert.throws(() => official.DBOSPortableJSON.stringify(v), TypeError);
    assert.throws(
      () => DBOSPortableJSON.stringify(v),
      (e: unknown) => e instanceof TypeError && e.message === 'Attempt to do portable JSON serialization of a map with non-string keys',
    );
  });

  test('null text is null', () => {
    assert.equal(DBOSPortableJSON.parse(null), null);
  });
});

// A custom serializer, as DBOSConfig.serializer takes one: async, and not JSON on the wire.
const base64Serializer: DBOSSerializer = {
  name: () => 'test_base64_json',
  stringify: async (v: unknown) => Buffer.from(JSON.stringify(v ?? null)).toString('base64'),
  parse: async (text: string | null | undefined) => (text == null ? null : (JSON.parse(Buffer.from(text, 'base64').toString()) as unknown)),
};

describe('values: serializeValue / deserializeValue', () => {
  const samples: unknown[] = ['x', 0, { a: [1, 2] }, new Date(5), null];
  for (const format of [undefined, 'native', 'portable'] as const) {
    test(`format ${String(format)}: tag and text as DBOS writes them`, async () => {
      for (const v of samples) {
        const ours = await serializeValue(v, DBOSJSON, format);
        const theirs = await official.serializeValue(v, official.DBOSJSON, format);
        assert.deepStrictEqual({ value: ours.value, serialization: ours.serialization }, {
          value: theirs.serializedValue,
          serialization: theirs.serialization,
        });
        assert.equal(ours.serialization, format === 'portable' ? 'portable_json' : 'js_superjson');
        assert.deepStrictEqual(await deserializeValue(theirs.serializedValue, theirs.serialization, DBOSJSON), await official.deserializeValue(ours.value, ours.serialization, official.DBOSJSON));
      }
    });
  }

  test('a custom serializer writes its own tag, and both sides read it with that serializer', async () => {
    const v = { order: 'A-1', qty: 3 };
    const ours = await serializeValue(v, base64Serializer);
    const theirs = await official.serializeValue(v, base64Serializer, undefined);
    assert.equal(ours.serialization, 'test_base64_json');
    assert.equal(ours.value, theirs.serializedValue);
    assert.deepStrictEqual(await deserializeValue(ours.value, ours.serialization, base64Serializer), v);
    assert.deepStrictEqual(await official.deserializeValue(ours.value, ours.serialization, base64Serializer), v);
    // The built-in tags are read whatever serializer is configured.
    const native = await serializeValue(v, base64Serializer, 'native');
    assert.equal(native.serialization, 'js_superjson');
    assert.deepStrictEqual(await deserializeValue(native.value, 'js_superjson', base64Serializer), v);
  });

  test('a row without a tag is the configured serializer\'s', async () => {
    const marked = DBOSJSON.stringify(new Map([[1, 2]]));
    assert.deepStrictEqual(await deserializeValue(marked, null, DBOSJSON), new Map([[1, 2]]));
    const b64 = await base64Serializer.stringify([1]);
    assert.deepStrictEqual(await deserializeValue(b64, null, base64Serializer), [1]);
    assert.deepStrictEqual(await official.deserializeValue(b64, null, base64Serializer), [1]);
    // DBOSJSON refuses an unmarked text, for DBOS and for us.
    await assert.rejects(official.deserializeValue('{"a":1}', null, official.DBOSJSON), TypeError);
    await assert.rejects(deserializeValue('{"a":1}', null, DBOSJSON), TypeError);
    assert.equal(await deserializeValue(null, 'js_superjson', DBOSJSON), null);
    assert.equal(await deserializeValue(null, 'portable_json', DBOSJSON), null);
  });

  test('an unknown tag is an error naming it', async () => {
    for (const tag of ['py_pickle', 'some_other_serializer']) {
      const expected = `Value deserialization type ${tag} is not available`;
      await assert.rejects(official.deserializeValue('gASVAg==', tag, official.DBOSJSON), { message: expected });
      await assert.rejects(deserializeValue('gASVAg==', tag, DBOSJSON), (e: unknown) => e instanceof TypeError && e.message === expected);
      await assert.rejects(deserializeArgs('gASVAg==', tag, DBOSJSON), { message: expected });
      await assert.rejects(deserializeError('gASVAg==', tag, DBOSJSON), { message: expected });
    }
  });

  test('serializationFor picks the explicit format, else the serializer\'s name', () => {
    assert.equal(serializationFor('portable', base64Serializer), 'portable_json');
    assert.equal(serializationFor('native', base64Serializer), 'js_superjson');
    assert.equal(serializationFor(undefined, base64Serializer), 'test_base64_json');
  });
});

describe('arguments: serializeArgs / deserializeArgs', () => {
  const args: unknown[] = ['order-9', 2n, new Date(0), new Map([['k', 'v']]), undefined, { nested: [new Set([1])] }];

  test('native: the array itself, as DBOS writes it', async () => {
    for (const format of [undefined, 'native'] as const) {
      const ours = await serializeArgs(args, DBOSJSON, format);
      const theirs = await official.serializeArgs(args, undefined, official.DBOSJSON, format);
      assert.equal(ours.value, theirs.serializedValue);
      assert.equal(ours.serialization, theirs.serialization);
      assert.deepStrictEqual(await deserializeArgs(theirs.serializedValue, theirs.serialization, DBOSJSON), args);
      assert.deepStrictEqual(await official.deserializePositionalArgs(ours.value, ours.serialization, official.DBOSJSON), args);
    }
  });

  test('portable: {"positionalArgs": [...], "namedArgs": {...}}', async () => {
    const simple = ['a', 1, new Date(0), 5n];
    const ours = await serializeArgs(simple, DBOSJSON, 'portable');
    const theirs = await official.serializeArgs(simple, undefined, official.DBOSJSON, 'portable');
    assert.equal(ours.value, theirs.serializedValue);
    assert.equal(ours.serialization, 'portable_json');
    assert.equal(ours.value, '{"positionalArgs":["a",1,"1970-01-01T00:00:00.000Z","5"]}');
    const named = await serializeArgs([1], DBOSJSON, 'portable', { who: 'x', when: new Date(0) });
    const namedTheirs = await official.serializeArgs([1], { who: 'x', when: new Date(0) }, official.DBOSJSON, 'portable');
    assert.equal(named.value, namedTheirs.serializedValue);
    assert.equal(named.value, '{"positionalArgs":[1],"namedArgs":{"who":"x","when":"1970-01-01T00:00:00.000Z"}}');
    assert.deepStrictEqual(await deserializeArgs(named.value, named.serialization, DBOSJSON), [1]);
    assert.deepStrictEqual(await official.deserializePositionalArgs(named.value, named.serialization, official.DBOSJSON), [1]);
    // What another SDK writes: named arguments and all.
    const fromPython = '{"positionalArgs": [1, "two", {"three": 3}], "namedArgs": {"four": 4}}';
    assert.deepStrictEqual(await deserializeArgs(fromPython, 'portable_json', DBOSJSON), [1, 'two', { three: 3 }]);
    assert.deepStrictEqual(await deserializeArgs('{"namedArgs": {}}', 'portable_json', DBOSJSON), []);
  });

  test('named arguments outside portable JSON are refused, as DBOS refuses them', async () => {
    await assert.rejects(official.serializeArgs([1], { a: 1 }, official.DBOSJSON, 'native'), TypeError);
    await assert.rejects(serializeArgs([1], DBOSJSON, 'native', { a: 1 }), {
      message: "Serialization format 'native' does not currently support named args.",
    });
  });

  test('a custom serializer and a row without a tag', async () => {
    const ours = await serializeArgs([1, 'x'], base64Serializer);
    const theirs = await official.serializeArgs([1, 'x'], undefined, base64Serializer, undefined);
    assert.deepStrictEqual(ours, { value: theirs.serializedValue, serialization: 'test_base64_json' });
    assert.deepStrictEqual(await deserializeArgs(ours.value, null, base64Serializer), [1, 'x']);
    assert.deepStrictEqual(await deserializeArgs(ours.value, 'test_base64_json', base64Serializer), [1, 'x']);
  });

  test('no inputs are no arguments; inputs that are not a list are refused', async () => {
    assert.deepStrictEqual(await deserializeArgs(null, 'js_superjson', DBOSJSON), []);
    await assert.rejects(deserializeArgs(DBOSJSON.stringify({ a: 1 }), 'js_superjson', DBOSJSON), TypeError);
  });
});

// The fields a reader sees on a revived error, cause chain included. A
// revived thrown non-Error has a stack of its own revival, so it can be left out.
function errorShape(e: unknown, depth = 0, withStack = true): unknown {
  if (!(e instanceof Error)) return e;
  const own: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) own[k] = v instanceof Error ? errorShape(v, depth + 1, withStack) : v;
  const errors = (e as { errors?: unknown }).errors;
  return {
    isError: true,
    name: e.name,
    message: e.message,
    stack: withStack ? e.stack : undefined,
    own,
    cause: depth < 10 ? errorShape(e.cause, depth + 1, withStack) : '...',
    errors: Array.isArray(errors) ? errors.map((x: unknown) => errorShape(x, depth + 1, withStack)) : undefined,
  };
}

function errorCases(): [string, () => unknown][] {
  return [
    ['Error with a cause chain and a code', withCause],
    ['TypeError', () => new TypeError('wrong type')],
    [
      'Error with extra fields',
      () => Object.assign(new Error('extra'), { status: 503, details: { retryAfter: 2, tags: ['a'] } }),
    ],
    ['a cause that is not an Error', () => new Error('wrapped', { cause: { reason: 'plain object', n: 1 } })],
    [
      'a circular cause',
      () => {
        const a = new Error('a');
        const b = new Error('b', { cause: a });
        Object.defineProperty(a, 'cause', { value: b, enumerable: false, configurable: true, writable: true });
        return a;
      },
    ],
    [
      'AggregateError with causes',
      () => new AggregateError([new Error('first', { cause: new Error('first cause') }), new RangeError('second')], 'many', { cause: new Error('agg cause') }),
    ],
    [
      'DBOSMaxStepRetriesError with errors that have causes',
      () => new DBOSMaxStepRetriesError('myStep', 2, [new Error('try 1', { cause: new Error('io') }), new Error('try 2')]),
    ],
    ['DBOSQueueDuplicatedError', () => new DBOSQueueDuplicatedError('wf-1', 'q', 'dedup-1')],
    ['DBOSWorkflowIDInUseError', () => new DBOSWorkflowIDInUseError('wf-2', 'SUCCESS', 'myWorkflow')],
    ['a thrown string', () => 'just a string'],
    ['a thrown number', () => 42],
    ['a thrown object', () => ({ message: 'looks like an error', code: 7 })],
  ];
}

describe('errors: serializeError / deserializeError', () => {
  for (const [label, make] of errorCases()) {
    test(`${label}: native text as DBOS writes it, revived alike on both sides`, async () => {
      const err = make();
      const ours = await serializeError(err, DBOSJSON);
      const theirs = await official.serializeResError(err as Error, official.DBOSJSON, undefined);
      assert.equal(ours.serialization, 'js_superjson');
      assert.equal(ours.value, theirs.serializedValue);
      const oursBack = await deserializeError(ours.value, ours.serialization, DBOSJSON);
      const theirsBack = await official.deserializeResError(ours.value, ours.serialization, official.DBOSJSON);
      const recordedStack = err instanceof Error;
      assert.deepStrictEqual(errorShape(oursBack, 0, recordedStack), errorShape(theirsBack, 0, recordedStack));
      assert.ok(oursBack instanceof Error);
      if (err instanceof Error) {
        assert.equal(oursBack.name, err.name);
        assert.equal(oursBack.message, err.message);
        assert.equal(oursBack.stack, err.stack);
      }
    });
  }

  test('the cause chain comes back as Errors, hidden as native causes are', async () => {
    const back = await deserializeError((await serializeError(withCause(), DBOSJSON)).value, 'js_superjson', DBOSJSON);
    assert.equal((back as Error & { code?: string }).code, 'E_TOP');
    const mid = back.cause as Error;
    assert.ok(mid instanceof Error);
    assert.equal(mid.name, 'TypeError');
    assert.equal(mid.message, 'middle');
    const root = mid.cause as Error;
    assert.ok(root instanceof Error);
    assert.equal(root.name, 'RangeError');
    assert.equal(root.message, 'root cause');
    assert.equal(Object.getOwnPropertyDescriptor(back, 'cause')?.enumerable, false);
  });

  test('a revived DBOS error keeps its fields (DBOS restores no class)', async () => {
    const err = new DBOSQueueDuplicatedError('wf-1', 'q', 'dedup-1');
    const back = (await deserializeError((await serializeError(err, DBOSJSON)).value, 'js_superjson', DBOSJSON)) as Error & Record<string, unknown>;
    assert.equal(back.name, 'DBOSQueueDuplicatedError');
    assert.equal(back['dbosErrorCode'], 28);
    assert.equal(back['queue'], 'q');
    assert.equal(back['deduplicationID'], 'dedup-1');
    assert.equal(officialErrors.getDBOSErrorCode(back), 28);
  });

  test('our DBOS errors write the bytes the official ones write', async () => {
    const pairs: [Error, Error][] = [
      [new DBOSQueueDuplicatedError('w', 'q', 'd'), new officialErrors.DBOSQueueDuplicatedError('w', 'q', 'd')],
      [new DBOSWorkflowIDInUseError('w', 'PENDING', 'n'), new officialErrors.DBOSWorkflowIDInUseError('w', 'PENDING', 'n')],
      [
        new DBOSMaxStepRetriesError('s', 1, [new Error('x')]),
        new officialErrors.DBOSMaxStepRetriesError('s', 1, [new Error('x')]),
      ],
    ];
    for (const [ours, theirs] of pairs) {
      // Same stacks, so that only the error's own shape can differ.
      theirs.stack = ours.stack = 'Error: fixed stack';
      for (const e of [ours, theirs]) {
        const inner = (e as { errors?: Error[] }).errors?.[0];
        if (inner) inner.stack = 'Error: inner stack';
      }
      assert.equal((await serializeError(ours, DBOSJSON)).value, (await official.serializeResError(theirs, official.DBOSJSON, undefined)).serializedValue);
      assert.equal(DBOSPortableJSON.stringify(ours), official.DBOSPortableJSON.stringify(theirs));
    }
  });

  test('portable: {name, message, code, data}, revived as a PortableWorkflowError', async () => {
    const err = Object.assign(new Error('declined'), { name: 'PaymentError', code: 402, data: { card: 'visa', when: new Date(0) } });
    const ours = await serializeError(err, DBOSJSON, 'portable');
    const theirs = await official.serializeResError(err, official.DBOSJSON, 'portable');
    assert.deepStrictEqual(ours, { value: theirs.serializedValue, serialization: 'portable_json' });
    assert.equal(ours.value, '{"name":"PaymentError","message":"declined","code":402,"data":{"card":"visa","when":"1970-01-01T00:00:00.000Z"}}');
    const back = await deserializeError(ours.value, 'portable_json', DBOSJSON);
    assert.ok(back instanceof PortableWorkflowError);
    assert.ok(back instanceof Error);
    // DBOS throws its revived portable error rather than returning it.
    const theirsBack = await official.deserializeResError(ours.value, 'portable_json', official.DBOSJSON).then(
      () => assert.fail('expected the official reader to throw'),
      (e: unknown) => e as InstanceType<typeof officialSchema.PortableWorkflowError>,
    );
    assert.ok(theirsBack instanceof officialSchema.PortableWorkflowError);
    for (const e of [back, theirsBack]) {
      assert.equal(e.name, 'PaymentError');
      assert.equal(e.message, 'declined');
      assert.equal((e as PortableWorkflowError).code, 402);
      assert.deepStrictEqual((e as PortableWorkflowError).data, { card: 'visa', when: '1970-01-01T00:00:00.000Z' });
    }
    assert.deepStrictEqual(Object.keys(back), Object.keys(theirsBack));
    // A plain Error has no code or data, and another SDK's record reads the same.
    assert.equal((await serializeError(new Error('x'), DBOSJSON, 'portable')).value, '{"name":"Error","message":"x"}');
    const fromPython = await deserializeError('{"name": "ValueError", "message": "bad", "code": null, "data": null}', 'portable_json', DBOSJSON);
    assert.equal(fromPython.name, 'ValueError');
    assert.equal(fromPython.message, 'bad');
    // Thrown non-Errors.
    for (const thrown of ['s', 5]) {
      const p = await serializeError(thrown, DBOSJSON, 'portable');
      assert.equal(p.value, (await official.serializeResError(thrown as unknown as Error, official.DBOSJSON, 'portable')).serializedValue);
    }
  });

  test('by tag: a workflow\'s recorded serialization decides its error\'s', async () => {
    const err = new Error('boom');
    for (const tag of ['portable_json', 'js_superjson', null, 'test_base64_json']) {
      const ours = await serializeErrorAs(err, base64Serializer, tag);
      const theirs = await official.serializeResErrorWithSerializer(err, base64Serializer, tag);
      assert.equal(ours.value, theirs.serializedValue);
      assert.equal(ours.serialization, theirs.serialization);
      const back = await deserializeError(ours.value, ours.serialization, base64Serializer);
      assert.equal(back.message, 'boom');
    }
  });

  test('a custom serializer\'s errors', async () => {
    const err = withCause();
    const ours = await serializeError(err, base64Serializer);
    const theirs = await official.serializeResError(err, base64Serializer, undefined);
    assert.deepStrictEqual(ours, { value: theirs.serializedValue, serialization: 'test_base64_json' });
    const back = await deserializeError(ours.value, null, base64Serializer);
    assert.deepStrictEqual(errorShape(back), errorShape(await official.deserializeResError(ours.value, null, base64Serializer)));
    assert.equal((back.cause as Error).message, 'middle');
  });
});

describe('round trips (what a workflow or caller is handed)', () => {
  test('text, tag and copy as DBOS makes them, for each format', async () => {
    const v = { when: new Date(0), n: 1n, m: new Map([['a', 1]]) };
    for (const format of [undefined, 'native', 'portable'] as const) {
      const ours = await roundTrip(v, DBOSJSON, format);
      const theirs = await official.serializeFunctionInputOutput(v, [], official.DBOSJSON, format);
      assert.equal(ours.value, theirs.stringified);
      assert.equal(ours.serialization, theirs.sername);
      assert.deepStrictEqual(ours.revived, theirs.deserialized);
    }
  });

  test('functions do not cross: the copy gets stubs that say so, worded as DBOS words them', async () => {
    const v = { point: new Point(3, 4), callback: () => 1, list: [{ go: () => 2 }] };
    const ours = await roundTrip(v, DBOSJSON, undefined, ['myWorkflow', '<arguments>']);
    const theirs = await official.serializeFunctionInputOutput(v, ['myWorkflow', '<arguments>'], official.DBOSJSON, undefined);
    // The recipe made a real Point; the plain objects lost their functions.
    assert.equal(ours.revived.point.norm(), 5);
    const calls: [string, (r: typeof v) => unknown][] = [
      ['callback', (r) => r.callback()],
      ['list[0].go', (r) => r.list[0]!.go()],
    ];
    for (const [, call] of calls) {
      let oursMsg = '';
      let theirsMsg = '';
      try {
        call(ours.revived);
      } catch (e) {
        oursMsg = (e as Error).message;
      }
      try {
        call(theirs.deserialized);
      } catch (e) {
        theirsMsg = (e as Error).message;
      }
      assert.ok(oursMsg.startsWith("Attempted to call '"), oursMsg);
      assert.equal(oursMsg, theirsMsg);
    }
  });

  test('a workflow\'s arguments: what DBOS stores and hands the workflow', async () => {
    const args = ['id', new Date(0), 3n];
    for (const format of [undefined, 'native', 'portable'] as const) {
      const ours = await roundTripArgs(args, DBOSJSON, format, ['wf', '<arguments>']);
      const theirs = await official.serializeFunctionInputOutput(
        format === 'portable' ? { positionalArgs: args } : args,
        ['wf', '<arguments>'],
        official.DBOSJSON,
        format,
      );
      assert.equal(ours.value, theirs.stringified);
      assert.equal(ours.serialization, theirs.sername);
      const handed = format === 'portable' ? (theirs.deserialized as { positionalArgs: unknown[] }).positionalArgs : theirs.deserialized;
      assert.deepStrictEqual(ours.revived, handed);
      assert.deepStrictEqual(await deserializeArgs(ours.value, ours.serialization, DBOSJSON), ours.revived);
    }
    assert.deepStrictEqual((await roundTripArgs(args, DBOSJSON, 'portable')).revived, ['id', '1970-01-01T00:00:00.000Z', '3']);
  });

  test('a tag that is neither built in nor the serializer\'s is refused', async () => {
    await assert.rejects(official.serializeFunctionInputOutputWithSerializer(1, [], base64Serializer, 'other'), TypeError);
    await assert.rejects(roundTripAs(1, base64Serializer, 'other'), {
      message: 'Serializer provided (test_base64_json) is not compatible with the required serialization (other)',
    });
    const custom = await roundTripAs({ a: 1 }, base64Serializer, null);
    assert.equal(custom.serialization, 'test_base64_json');
    assert.deepStrictEqual(custom.revived, { a: 1 });
  });
});

describe('best-effort reads for listings', () => {
  test('what cannot be read comes back raw, as DBOS returns it', async () => {
    const unreadable = 'gASVAg==';
    assert.equal(await safeDeserializeValue(unreadable, 'py_pickle', DBOSJSON), await official.safeParse(official.DBOSJSON, unreadable, 'py_pickle'));
    assert.equal(await safeDeserializeArgs(unreadable, 'py_pickle', DBOSJSON), await official.safeParsePositionalArgs(official.DBOSJSON, unreadable, 'py_pickle'));
    const e = await safeDeserializeError(unreadable, 'py_pickle', DBOSJSON);
    const e2 = await official.safeParseError(official.DBOSJSON, unreadable, 'py_pickle');
    assert.equal(e.message, e2.message);
    assert.equal(e.message, unreadable);
    // DBOS's listing shows a portable error as an Error of its raw text.
    const portable = '{"name":"X","message":"m"}';
    assert.equal((await safeDeserializeError(portable, 'portable_json', DBOSJSON)).message, (await official.safeParseError(official.DBOSJSON, portable, 'portable_json')).message);
    // What can be read is read.
    const good = DBOSJSON.stringify([1n]);
    assert.deepStrictEqual(await safeDeserializeArgs(good, 'js_superjson', DBOSJSON), [1n]);
    assert.deepStrictEqual(await safeDeserializeValue(good, null, DBOSJSON), [1n]);
  });
});
