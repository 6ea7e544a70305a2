// The official DBOS TypeScript SDK's own modules (a dev dependency), loaded by
// file: its package exports only its index, and these are what the tests
// compare the binding's serializers and errors with.
import * as path from 'node:path';

const sdkSrc = path.dirname(require.resolve('@dbos-inc/dbos-sdk'));

export const officialSerialization = require(path.join(sdkSrc, 'serialization.js')) as typeof import('@dbos-inc/dbos-sdk/dist/src/serialization');
export const officialErrors = require(path.join(sdkSrc, 'error.js')) as typeof import('@dbos-inc/dbos-sdk/dist/src/error');
export const officialSchema = require(path.join(sdkSrc, '..', 'schemas', 'system_db_schema.js')) as typeof import('@dbos-inc/dbos-sdk/dist/schemas/system_db_schema');

/** The repository's protocol/testdata, from build/test or test. */
export function protocolTestdata(name: string): string {
  // build/test/official.js -> bindings/node -> the repository's root.
  return path.resolve(__dirname, '..', '..', '..', '..', 'protocol', 'testdata', name);
}
