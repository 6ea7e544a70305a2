/**
 * Who serves a Unix socket: the credentials the kernel recorded for the
 * process at the other end of a connected socket (Linux's SO_PEERCRED), and
 * the rule deciding whether this process trusts that user with its requests
 * (PROTOCOL.md section 1, "Trust, the other way").
 *
 * Node has no getsockopt, so the option is read by calling libc through
 * koffi on the connected socket's file descriptor.
 */
import koffi from 'koffi';
import { DBOSAgentUntrustedError, DBOSInitializationError } from '../error';

/** struct ucred of <sys/socket.h>. */
export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

/** The environment variable naming the users, besides this process's own and root, trusted to serve the agent: "1001,1002". */
export const TRUSTED_UIDS_ENV = 'DBOS_AGENT_TRUSTED_UIDS';

// <asm-generic/socket.h>, which x86, arm and riscv use (not mips, sparc,
// parisc or powerpc, which Node's prebuilt koffi does not ship either).
const SOL_SOCKET = 1;
const SO_PEERCRED = 17;

type GetSockOpt = (fd: number, level: number, name: number, out: PeerCredentials, len: number[]) => number;
let getsockopt: GetSockOpt | undefined;

function libcGetsockopt(): GetSockOpt {
  if (getsockopt === undefined) {
    // dlopen(NULL): the symbols of the process, libc's among them.
    const libc = koffi.load(null);
    const ucred = koffi.struct({ pid: 'int32_t', uid: 'uint32_t', gid: 'uint32_t' });
    getsockopt = libc.func('getsockopt', 'int', [
      'int',
      'int',
      'int',
      koffi.out(koffi.pointer(ucred)),
      koffi.inout(koffi.pointer('uint32_t')),
    ]) as GetSockOpt;
  }
  return getsockopt;
}

/**
 * The credentials of the peer of the connected Unix socket `fd`. Throws an
 * Error (with the errno) when the kernel does not give them.
 */
export function peerCredentials(fd: number): PeerCredentials {
  if (process.platform !== 'linux') {
    throw new Error(`this platform (${process.platform}) has no SO_PEERCRED`);
  }
  const cred: PeerCredentials = { pid: 0, uid: 0, gid: 0 };
  const len = [12];
  const rc = libcGetsockopt()(fd, SOL_SOCKET, SO_PEERCRED, cred, len);
  if (rc !== 0) {
    throw new Error(`getsockopt(SO_PEERCRED) failed: errno ${koffi.errno()}`);
  }
  if (len[0] !== 12) {
    throw new Error(`getsockopt(SO_PEERCRED) returned ${len[0]} bytes, not a struct ucred`);
  }
  return { pid: cred.pid, uid: cred.uid, gid: cred.gid };
}

/** Whom this process trusts to serve the agent: its own user, root and the configured users. */
export interface TrustPolicy {
  /** This process's user (process.getuid(); a test may pretend another). */
  ownUid: number;
  /** The users trusted besides ownUid and root. */
  trustedUids: ReadonlySet<number>;
}

/** Whether `policy` trusts `uid` to serve the agent. */
export function trusts(policy: TrustPolicy, uid: number): boolean {
  return uid === policy.ownUid || uid === 0 || policy.trustedUids.has(uid);
}

/** The policy of this process: its own user, root and `trustedUids`. */
export function processTrustPolicy(trustedUids: ReadonlySet<number> = new Set()): TrustPolicy {
  return { ownUid: ownUid(), trustedUids };
}

function ownUid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : -1;
}

/**
 * The users besides this process's own and root that may serve the agent:
 * the configured ones (a list of uids, or a comma-separated string), else
 * env DBOS_AGENT_TRUSTED_UIDS, else none. Throws DBOSInitializationError on
 * anything that is not a list of non-negative integers.
 */
export function resolveTrustedUids(
  configured?: readonly number[] | string,
  env: NodeJS.ProcessEnv = process.env,
): Set<number> {
  let source = 'trustedUids';
  let items: readonly unknown[];
  if (configured === undefined) {
    source = TRUSTED_UIDS_ENV;
    items = (env[TRUSTED_UIDS_ENV] ?? '').split(',');
  } else if (typeof configured === 'string') {
    items = configured.split(',');
  } else {
    items = configured;
  }
  const uids = new Set<number>();
  for (const item of items) {
    let uid: number;
    if (typeof item === 'string') {
      const s = item.trim();
      if (s === '') continue;
      uid = /^[0-9]+$/.test(s) ? Number(s) : NaN;
    } else {
      uid = typeof item === 'number' ? item : NaN;
    }
    if (!Number.isSafeInteger(uid) || uid < 0 || uid > 0xffffffff) {
      throw new DBOSInitializationError(
        `${source} must list user ids (non-negative integers, e.g. "1001,1002"), not ${JSON.stringify(item)}`,
      );
    }
    uids.add(uid);
  }
  return uids;
}

/**
 * The refusal of a socket served by `uid`, whoever checked it (this binding,
 * or libdbos.so in connect mode, whose message `detail` is then).
 */
export function untrustedError(path: string, uid: number, policyUid: number, detail = ''): DBOSAgentUntrustedError {
  return new DBOSAgentUntrustedError(
    `refusing the dbos-agent socket ${path}: it is served by uid ${uid}${detail}, not by this process's user ` +
      `(uid ${policyUid}), root or a trusted user (config trustedUids, env ${TRUSTED_UIDS_ENV}); nothing was sent to it`,
    path,
    uid,
  );
}

/**
 * Refuses the connected socket `fd` (at `path`) unless `policy` trusts the
 * user serving it: throws DBOSAgentUntrustedError. Returns the peer's
 * credentials.
 */
export function checkPeer(fd: number, path: string, policy: TrustPolicy): PeerCredentials {
  let cred: PeerCredentials;
  try {
    cred = peerCredentials(fd);
  } catch (e) {
    throw new DBOSAgentUntrustedError(
      `cannot check who serves the dbos-agent socket ${path}: ${(e as Error).message}`,
      path,
    );
  }
  if (!trusts(policy, cred.uid)) {
    throw untrustedError(path, cred.uid, policy.ownUid, ` (pid ${cred.pid})`);
  }
  return cred;
}
