// The binding's error classes against the official SDK's (constructed with the
// same arguments, they must agree in name, code, message and fields), and the
// mapping of the agent's error catalog onto them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import * as ours from '../src/error';
import {
  AGENT_ERROR_CLASSES,
  DBOSAgentProtocolError,
  DBOSAgentUnavailableError,
  DBOSAgentUntrustedError,
  DBOSError,
  PortableWorkflowError,
  errorFromAgent,
  isAgentTimeout,
} from '../src/error';
import { officialErrors as theirs, officialSchema, protocolTestdata } from './official';

type Ctor = new (...args: never[]) => Error;

// Constructor arguments for every class of DBOS's error module, each branch of its message.
const constructions: Record<string, unknown[][]> = {
  DBOSError: [['plain'], ['with a code', 9]],
  DBOSInitializationError: [['no config'], ['bad url', new Error('ECONNREFUSED')]],
  DBOSWorkflowConflictError: [['wf-1']],
  DBOSNotRegisteredError: [['myFn'], ['myFn', 'myFn is not a registered workflow function']],
  DBOSNonExistentWorkflowError: [['Workflow wf-2 does not exist']],
  DBOSMaxRecoveryAttemptsExceededError: [['wf-3'], ['wf-3', 5]],
  DBOSExecutorNotInitializedError: [[]],
  DBOSInvalidWorkflowTransitionError: [[], ['Invalid call to `DBOS.recv` inside a `step` or `transaction`']],
  DBOSConflictingWorkflowError: [['wf-4', 'Workflow already exists with a different function name: a, but the provided function name is: b']],
  DBOSMaxStepRetriesError: [['step', 3, [new Error('one'), new Error('two')]], ['step', 0, []]],
  DBOSWorkflowCancelledError: [['wf-5']],
  DBOSConflictingRegistrationError: [['already registered']],
  DBOSUnexpectedStepError: [
    ['wf-6', 3, 'stepA', 'stepB'],
    ['wf-6', 4, 'stepA', 'DBOS.patch-new-thing'],
  ],
  DBOSAwaitedWorkflowCancelledError: [['wf-7']],
  DBOSQueueDuplicatedError: [['wf-8', 'queue', 'dedup']],
  DBOSInvalidQueuePriorityError: [[0, 1, 2147483647]],
  DBOSAwaitedWorkflowExceededMaxRecoveryAttempts: [['wf-9']],
  DBOSStepTimeoutError: [['slowStep', 1500]],
  DBOSInvalidWorkflowInputError: [['myWorkflow', new TypeError('cannot serialize a socket')], ['myWorkflow', 'not an error']],
  DBOSStreamTimeoutError: [['wf-10', 'key'], ['wf-10', 'key', 2500]],
  DBOSStreamNondeterminismError: [['wf-11', 'key']],
  DBOSQueryTimeoutError: [[30000]],
  DBOSWorkflowIDInUseError: [['wf-12', 'SUCCESS', 'myWorkflow']],
  DBOSStepNondeterminismError: [['wf-13', 7]],
};

function exportsOf(m: object): Record<string, unknown> {
  return m as Record<string, unknown>;
}

describe('the error classes match DBOS TypeScript 5.3', () => {
  const theirExports = exportsOf(theirs);
  const ourExports = exportsOf(ours);

  test('every export of DBOS\'s error module exists here, of the same kind and value', () => {
    for (const [name, value] of Object.entries(theirExports)) {
      assert.ok(name in ourExports, `missing export ${name}`);
      assert.equal(typeof ourExports[name], typeof value, name);
      if (typeof value === 'number' || typeof value === 'string') assert.equal(ourExports[name], value, name);
    }
  });

  test('every error class has its construction cases here', () => {
    for (const [name, value] of Object.entries(theirExports)) {
      if (typeof value === 'function' && value.prototype instanceof Error) {
        assert.ok(constructions[name], `no construction cases for ${name}`);
      }
    }
  });

  for (const [name, cases] of Object.entries(constructions)) {
    test(`${name}: name, code, message and fields as DBOS's`, () => {
      const Ours = ourExports[name] as Ctor;
      const Theirs = theirExports[name] as Ctor;
      for (const args of cases) {
        const a = new Ours(...(args as never[]));
        const b = new Theirs(...(args as never[]));
        assert.ok(a instanceof Error);
        assert.ok(a instanceof DBOSError);
        assert.equal(a.name, b.name);
        assert.equal(a.message, b.message);
        assert.equal((a as DBOSError).dbosErrorCode, (b as DBOSError).dbosErrorCode);
        // The same own enumerable fields, in the same order (the order of a serialized error's keys).
        assert.deepStrictEqual(Object.entries(a), Object.entries(b));
        assert.equal(ours.getDBOSErrorCode(a), theirs.getDBOSErrorCode(b));
      }
    });
  }

  test('PortableWorkflowError as DBOS\'s', () => {
    const a = new PortableWorkflowError('m', 'SomeError', 7, { k: 1 });
    const b = new officialSchema.PortableWorkflowError('m', 'SomeError', 7, { k: 1 });
    assert.equal(a.name, b.name);
    assert.equal(a.message, b.message);
    assert.deepStrictEqual(Object.entries(a), Object.entries(b));
  });

  test('isStreamTimeoutError, isWorkflowIDInUseError and getDBOSErrorCode decide as DBOS\'s do', () => {
    const pairs: [unknown, unknown][] = [
      [new ours.DBOSStreamTimeoutError('w', 'k', 1), new theirs.DBOSStreamTimeoutError('w', 'k', 1)],
      [new ours.DBOSWorkflowIDInUseError('w', 's', 'n'), new theirs.DBOSWorkflowIDInUseError('w', 's', 'n')],
      [new PortableWorkflowError('m', 'DBOSStreamTimeoutError'), new officialSchema.PortableWorkflowError('m', 'DBOSStreamTimeoutError')],
      [new PortableWorkflowError('m', 'DBOSWorkflowIDInUseError'), new officialSchema.PortableWorkflowError('m', 'DBOSWorkflowIDInUseError')],
      [new PortableWorkflowError('m', 'Other'), new officialSchema.PortableWorkflowError('m', 'Other')],
      [Object.assign(new Error('revived'), { dbosErrorCode: 33 }), Object.assign(new Error('revived'), { dbosErrorCode: 33 })],
      [Object.assign(new Error('revived'), { dbosErrorCode: '36' }), Object.assign(new Error('revived'), { dbosErrorCode: '36' })],
      [new Error('plain'), new Error('plain')],
      ['a string', 'a string'],
      [null, null],
    ];
    for (const [a, b] of pairs) {
      assert.equal(ours.isStreamTimeoutError(a), theirs.isStreamTimeoutError(b), String(a));
      assert.equal(ours.isWorkflowIDInUseError(a), theirs.isWorkflowIDInUseError(b), String(a));
      if (a instanceof Error) assert.equal(ours.getDBOSErrorCode(a), theirs.getDBOSErrorCode(b as Error));
    }
    assert.equal(ours.isStreamTimeoutError(new PortableWorkflowError('m', 'DBOSStreamTimeoutError')), true);
    assert.equal(ours.isWorkflowIDInUseError(new ours.DBOSWorkflowIDInUseError('w', 's', 'n')), true);
  });
});

describe('the binding\'s own errors', () => {
  test('DBOSAgentUnavailableError', () => {
    const cause = new Error('connect ENOENT /run/dbos-agent.sock');
    const e = new DBOSAgentUnavailableError('cannot reach the dbos-agent at /run/dbos-agent.sock', { cause });
    assert.ok(e instanceof DBOSError);
    assert.equal(e.name, 'DBOSAgentUnavailableError');
    assert.equal(e.dbosErrorCode, 100);
    assert.equal(e.cause, cause);
    assert.equal(e.message, 'cannot reach the dbos-agent at /run/dbos-agent.sock');
  });

  test('DBOSAgentUntrustedError', () => {
    const e = new DBOSAgentUntrustedError('the socket /tmp/a.sock is served by uid 1234', '/tmp/a.sock', 1234);
    assert.ok(e instanceof DBOSError);
    assert.equal(e.name, 'DBOSAgentUntrustedError');
    assert.equal(e.dbosErrorCode, 103);
    assert.equal(e.path, '/tmp/a.sock');
    assert.equal(e.uid, 1234);
  });

  test('DBOSAgentProtocolError', () => {
    const e = new DBOSAgentProtocolError(103, 'unknown_op', 'op frobnicate is not known', { op: 'frobnicate' });
    assert.ok(e instanceof DBOSError);
    assert.equal(e.name, 'DBOSAgentProtocolError');
    assert.equal(e.dbosErrorCode, 101);
    assert.equal(e.code, 103);
    assert.equal(e.codeName, 'unknown_op');
    assert.equal(e.agentMessage, 'op frobnicate is not known');
    assert.equal(e.message, 'agent error unknown_op: op frobnicate is not known');
    assert.deepStrictEqual(e.data, { op: 'frobnicate' });
  });
});

interface CatalogEntry {
  code: number;
  name: string;
  dbos_name: string;
  retryable: boolean;
  close_connection: boolean;
  doc: string;
}

// The catalog names DBOS Python's exceptions; DBOS TypeScript's class of the same meaning.
const typescriptClassOf: Record<string, string> = {
  DBOSException: 'DBOSError',
  DBOSWorkflowFunctionNotFoundError: 'DBOSNotRegisteredError',
  DBOSNonExistentWorkflowError: 'DBOSNonExistentWorkflowError',
  DBOSConflictingWorkflowError: 'DBOSConflictingWorkflowError',
  DBOSQueueDeduplicatedError: 'DBOSQueueDuplicatedError',
  DBOSWorkflowConflictIDError: 'DBOSWorkflowConflictError',
  DBOSWorkflowCancelledError: 'DBOSWorkflowCancelledError',
  DBOSUnexpectedStepError: 'DBOSUnexpectedStepError',
  DBOSStepNondeterminismError: 'DBOSStepNondeterminismError',
  MaxRecoveryAttemptsExceededError: 'DBOSMaxRecoveryAttemptsExceededError',
  DBOSWorkflowIDInUseError: 'DBOSWorkflowIDInUseError',
  // None: the binding's own protocol error.
  '': 'DBOSAgentProtocolError',
};

describe('errorFromAgent: the agent\'s catalog', () => {
  const catalog = JSON.parse(readFileSync(protocolTestdata('error_codes.json'), 'utf8')) as CatalogEntry[];

  test('the catalog is there', () => {
    assert.ok(catalog.length >= 25, `only ${catalog.length} codes`);
  });

  test('every code is mapped, to the TypeScript class of the catalog\'s DBOS exception', () => {
    const unmapped = catalog.filter((c) => AGENT_ERROR_CLASSES[c.code] === undefined).map((c) => `${c.code} ${c.name}`);
    assert.deepStrictEqual(unmapped, [], `unmapped codes: ${unmapped.join(', ')}`);
    for (const c of catalog) {
      const expected = typescriptClassOf[c.dbos_name];
      assert.ok(expected, `code ${c.code} (${c.name}): no TypeScript class for DBOS exception ${c.dbos_name}`);
      assert.equal(AGENT_ERROR_CLASSES[c.code], expected, `code ${c.code} (${c.name})`);
    }
    // And nothing is mapped that the catalog does not have.
    assert.deepStrictEqual(
      Object.keys(AGENT_ERROR_CLASSES).map(Number).sort((a, b) => a - b),
      catalog.map((c) => c.code).sort((a, b) => a - b),
    );
  });

  for (const entry of JSON.parse(readFileSync(protocolTestdata('error_codes.json'), 'utf8')) as CatalogEntry[]) {
    test(`${entry.code} ${entry.name} gives a ${AGENT_ERROR_CLASSES[entry.code] ?? '(unmapped)'}`, () => {
      const className = AGENT_ERROR_CLASSES[entry.code];
      assert.ok(className, `code ${entry.code} is not mapped`);
      const cls = exportsOf(ours)[className] as Ctor;
      const e = errorFromAgent({ code: entry.code, name: entry.name, message: `the agent says ${entry.doc}` }, { workflowID: 'wf-x', stepID: 2 });
      assert.ok(e instanceof cls, `${e.constructor.name} is not a ${className}`);
      assert.ok(e instanceof DBOSError);
      // A DBOS class is DBOS's own (or the binding's, where DBOS has none).
      if (className !== 'DBOSAgentProtocolError') assert.equal(typeof exportsOf(theirs)[className], 'function');
    });
  }

  test('fields come from the reply\'s data and the call, in DBOS\'s words', () => {
    const cases: [Error, Error][] = [
      [
        errorFromAgent({ code: 200, name: 'workflow_not_found', message: 'workflow a does not exist', data: { workflow_id: 'a' } }),
        new theirs.DBOSNonExistentWorkflowError('Workflow a does not exist'),
      ],
      [
        errorFromAgent({ code: 200, name: 'workflow_not_found', message: 'workflows a, b do not exist', data: { workflow_id: 'a, b' } }),
        new theirs.DBOSNonExistentWorkflowError('Workflow a, b does not exist'),
      ],
      [
        errorFromAgent({ code: 200, name: 'workflow_not_found', message: 'workflow d does not exist' }, { workflowID: 'src', op: 'send', destinationID: 'd' }),
        new theirs.DBOSNonExistentWorkflowError('Sent to non-existent destination workflow UUID: d'),
      ],
      [
        errorFromAgent(
          { code: 201, name: 'workflow_conflict', message: 'Workflow already exists with a different function name: f, but the provided function name is: g' },
          { workflowID: 'w' },
        ),
        new theirs.DBOSConflictingWorkflowError('w', 'Workflow already exists with a different function name: f, but the provided function name is: g'),
      ],
      [
        errorFromAgent({ code: 202, name: 'deduplicated', message: 'm', data: { queue_name: 'q', deduplication_id: 'd' } }, { workflowID: 'w' }),
        new theirs.DBOSQueueDuplicatedError('w', 'q', 'd'),
      ],
      [
        // A debounce's refusal names the holder of the key.
        errorFromAgent({ code: 202, name: 'deduplicated', message: 'm', data: { workflow_id: 'holder', queue_name: 'q', deduplication_id: 'd' } }),
        new theirs.DBOSQueueDuplicatedError('holder', 'q', 'd'),
      ],
      [errorFromAgent({ code: 203, name: 'fenced', message: 'm' }, { workflowID: 'w' }), new theirs.DBOSWorkflowConflictError('w')],
      [errorFromAgent({ code: 204, name: 'workflow_cancelled', message: 'm' }, { workflowID: 'w' }), new theirs.DBOSWorkflowCancelledError('w')],
      [
        errorFromAgent({ code: 204, name: 'workflow_cancelled', message: 'm' }, { workflowID: 'child', awaited: true }),
        new theirs.DBOSAwaitedWorkflowCancelledError('child'),
      ],
      [
        errorFromAgent({ code: 205, name: 'unexpected_step', message: 'm', data: { recorded: 'stepB', attempted: 'stepA' } }, { workflowID: 'w', stepID: 3 }),
        new theirs.DBOSUnexpectedStepError('w', 3, 'stepA', 'stepB'),
      ],
      [
        errorFromAgent({ code: 205, name: 'unexpected_step', message: 'm', data: { recorded: 'DBOS.patch-x' } }, { workflowID: 'w', stepID: 1, stepName: 'mine' }),
        new theirs.DBOSUnexpectedStepError('w', 1, 'mine', 'DBOS.patch-x'),
      ],
      [errorFromAgent({ code: 206, name: 'step_conflict', message: 'm' }, { workflowID: 'w', stepID: 4 }), new theirs.DBOSStepNondeterminismError('w', 4)],
      [
        errorFromAgent({ code: 207, name: 'timeout', message: 'read_stream timed out' }, { workflowID: 'w', streamKey: 'k', timeoutMS: 100 }),
        new theirs.DBOSStreamTimeoutError('w', 'k', 100),
      ],
      [
        errorFromAgent({ code: 208, name: 'max_recovery_attempts_exceeded', message: 'm' }, { workflowID: 'w', maxRecoveryAttempts: 3 }),
        new theirs.DBOSMaxRecoveryAttemptsExceededError('w', 3),
      ],
      [
        errorFromAgent({ code: 208, name: 'max_recovery_attempts_exceeded', message: 'm' }, { workflowID: 'w', awaited: true }),
        new theirs.DBOSAwaitedWorkflowExceededMaxRecoveryAttempts('w'),
      ],
      [
        errorFromAgent({ code: 211, name: 'workflow_id_in_use', message: 'm', data: { workflow_id: 'w', status: 'SUCCESS', name: 'wfName' } }),
        new theirs.DBOSWorkflowIDInUseError('w', 'SUCCESS', 'wfName'),
      ],
      [
        errorFromAgent({ code: 109, name: 'not_registered', message: 'm' }, { workflowName: 'myWorkflow' }),
        new theirs.DBOSNotRegisteredError('myWorkflow'),
      ],
    ];
    for (const [a, b] of cases) {
      assert.equal(a.constructor.name, b.constructor.name);
      assert.equal(a.name, b.name);
      assert.equal(a.message, b.message);
      assert.deepStrictEqual(Object.entries(a), Object.entries(b));
    }
  });

  test('timeouts DBOS answers with null, and the plain DBOSErrors', () => {
    const t = errorFromAgent({ code: 207, name: 'timeout', message: 'get_result timed out' }, { workflowID: 'w' });
    assert.ok(isAgentTimeout(t));
    assert.ok(!isAgentTimeout(errorFromAgent({ code: 207, name: 'timeout', message: 'm' }, { streamKey: 'k' })));
    assert.ok(!isAgentTimeout(new Error('timeout')));
    for (const [code, name] of [
      [100, 'internal'],
      [104, 'invalid_argument'],
      [108, 'database_unavailable'],
      [209, 'stream_closed'],
      [210, 'workflow_active'],
    ] as const) {
      const e = errorFromAgent({ code, name, message: 'what happened' });
      assert.equal(e.constructor, DBOSError);
      assert.equal(e.message, `${name}: what happened`);
      assert.equal((e as DBOSError).dbosErrorCode, 1);
    }
  });

  test('unknown codes go by range, keeping the name and the message', () => {
    const refused = errorFromAgent({ code: 299, name: 'future_refusal', message: 'not now' });
    assert.equal(refused.constructor, DBOSError);
    assert.equal(refused.message, 'future_refusal: not now');
    for (const code of [150, 199, 300, 42]) {
      const e = errorFromAgent({ code, name: 'future_thing', message: 'huh', data: { k: 'v' } });
      assert.ok(e instanceof DBOSAgentProtocolError);
      assert.equal(e.code, code);
      assert.equal(e.codeName, 'future_thing');
      assert.equal(e.agentMessage, 'huh');
      assert.deepStrictEqual(e.data, { k: 'v' });
    }
  });
});
