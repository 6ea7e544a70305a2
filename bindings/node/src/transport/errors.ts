/**
 * The transport's errors. Minimal stand-ins with the names the binding's
 * error module (src/error.ts) will define; that module takes them over and
 * this file then re-exports them from there.
 */

/** The agent cannot be reached or started, or its session ended. */
export class DBOSAgentUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DBOSAgentUnavailableError';
  }
}

/**
 * A session of libdbos.so used by a child after fork() of the process that
 * opened it (or loaded the library): the library refuses every such call,
 * since its Go runtime's threads did not survive the fork.
 */
export class DBOSAgentForkedError extends DBOSAgentUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = 'DBOSAgentForkedError';
  }
}

/**
 * The socket is served by a user this process does not trust (not its own,
 * not root, not a configured trusted uid): closed before anything was sent
 * on it or read from it.
 */
export class DBOSAgentUntrustedError extends Error {
  constructor(
    message: string,
    /** The socket. */
    readonly path: string,
    /** The user serving it (-1 when it could not be read). */
    readonly uid: number = -1,
  ) {
    super(message);
    this.name = 'DBOSAgentUntrustedError';
  }
}

/** A configuration the transport cannot use (DBOS's DBOSInitializationError). */
export class DBOSInitializationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DBOSInitializationError';
  }
}
