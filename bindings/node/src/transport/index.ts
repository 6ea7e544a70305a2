/**
 * The transports, and the choice among them (node-contract.md): libdbos.so
 * when a library is named, else the agent's Unix socket.
 */
import type { Endpoint } from './stream';
import { DBOSInitializationError } from '../error';
import { LIBRARY_ENV, LIBRARY_MODES, LibraryEndpoint, LibraryMode } from './library';
import { processTrustPolicy, resolveTrustedUids } from './peercred';
import { resolveSocketPath, SocketEndpoint } from './socket';

export type { Endpoint, FrameStream } from './stream';
export { DBOSAgentForkedError, DBOSAgentUnavailableError, DBOSAgentUntrustedError } from '../error';
export { LibraryEndpoint, LibraryStream, loadLibrary } from './library';
export { SocketEndpoint, SocketStream, defaultSocketPath, resolveSocketPath } from './socket';
export { checkPeer, peerCredentials, resolveTrustedUids, trusts } from './peercred';
export type { PeerCredentials, TrustPolicy } from './peercred';

/** The environment variable choosing libdbos.so's mode. */
export const MODE_ENV = 'DBOS_AGENT_MODE';
/** The environment variable naming the system database (DBOS's). */
export const DATABASE_URL_ENV = 'DBOS_SYSTEM_DATABASE_URL';
/** The environment variable naming the dbos-agent binary (sidecar mode's child). */
export const AGENT_BINARY_ENV = 'DBOS_AGENT_BINARY';

export interface TransportConfig {
  agentSocket?: string;
  agentLibrary?: string;
  agentMode?: string;
  systemDatabaseUrl?: string;
  /** The system schema (DBOS's systemDatabaseSchemaName), for embedded and sidecar modes. */
  systemDatabaseSchemaName?: string;
  executorID?: string;
  applicationVersion?: string;
  trustedUids?: number[];
}

/**
 * The endpoint the config and environment select: `agentLibrary` / env
 * DBOS_AGENT_LIBRARY gives libdbos.so, in the mode of `agentMode` / env
 * DBOS_AGENT_MODE (embedded when none is given); else the socket of
 * `agentSocket` / env DBOS_AGENT_SOCKET / the agent's default path, with the
 * trust check of `trustedUids` / env DBOS_AGENT_TRUSTED_UIDS. Throws
 * DBOSInitializationError for a config it cannot use.
 */
export function resolveEndpoint(cfg: TransportConfig, env: NodeJS.ProcessEnv = process.env): Endpoint {
  const library = cfg.agentLibrary || env[LIBRARY_ENV] || undefined;
  const mode = cfg.agentMode || env[MODE_ENV] || undefined;
  if (mode !== undefined && !(LIBRARY_MODES as readonly string[]).includes(mode)) {
    throw new DBOSInitializationError(
      `agentMode (env ${MODE_ENV}) must be one of ${LIBRARY_MODES.join(', ')}, not ${JSON.stringify(mode)}`,
    );
  }
  if (library === undefined) {
    if (mode === 'embedded' || mode === 'sidecar') {
      throw new DBOSInitializationError(
        `agentMode ${JSON.stringify(mode)} runs the agent through libdbos.so: name it with agentLibrary or env ${LIBRARY_ENV}`,
      );
    }
    return new SocketEndpoint(
      resolveSocketPath(cfg.agentSocket, env),
      processTrustPolicy(resolveTrustedUids(cfg.trustedUids, env)),
    );
  }
  const libMode = (mode ?? 'embedded') as LibraryMode;
  if (libMode === 'connect') {
    const config: Record<string, unknown> & { mode: LibraryMode } = {
      mode: libMode,
      socket: resolveSocketPath(cfg.agentSocket, env),
    };
    const uids = resolveTrustedUids(cfg.trustedUids, env);
    if (uids.size > 0) config.trusted_uids = [...uids].sort((a, b) => a - b);
    return new LibraryEndpoint(library, config);
  }
  const url = cfg.systemDatabaseUrl || env[DATABASE_URL_ENV] || '';
  if (!url) {
    throw new DBOSInitializationError(
      `agentMode ${JSON.stringify(libMode)} runs the agent on the system database: set systemDatabaseUrl or env ${DATABASE_URL_ENV}`,
    );
  }
  const config: Record<string, unknown> & { mode: LibraryMode } = { mode: libMode, database_url: agentDatabaseUrl(url) };
  if (cfg.systemDatabaseSchemaName) config.schema = cfg.systemDatabaseSchemaName;
  if (cfg.executorID) config.executor_id = cfg.executorID;
  if (cfg.applicationVersion) config.application_version = cfg.applicationVersion;
  if (libMode === 'sidecar' && env[AGENT_BINARY_ENV]) config.agent_path = env[AGENT_BINARY_ENV];
  return new LibraryEndpoint(library, config);
}

/** A URL naming a driver (`postgresql+psycopg://...`) as the agent reads it: without the driver. */
function agentDatabaseUrl(url: string): string {
  const at = url.indexOf('://');
  if (at < 0) {
    throw new DBOSInitializationError(`Invalid system database URL: ${JSON.stringify(url)}`);
  }
  return url.slice(0, at).split('+', 1)[0] + url.slice(at);
}
