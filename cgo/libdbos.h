/* libdbos.h: the C ABI of libdbos.so, the DBOS agent as a library.
 *
 * This header is the contract (cgo/README.md explains it); it is written by
 * hand and shipped, and the library is compiled against it. A handle is one
 * session of frames of protocol/PROTOCOL.md, exactly as on the agent's Unix
 * socket: each a 4-byte big-endian length and a msgpack envelope. */
#ifndef LIBDBOS_H
#define LIBDBOS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DBOS_OK                 0  /* done */
#define DBOS_TIMEOUT            1  /* dbos_recv: no frame arrived within the timeout */
#define DBOS_CLOSED             2  /* the handle's session ended (closed, or the agent went away): no more frames */
#define DBOS_ERR_INVALID        3  /* bad argument: unknown or closed handle, NULL pointer, malformed config, bad bytes */
#define DBOS_ERR_FORKED         4  /* the handle was opened by another process: this is a child after fork() */
#define DBOS_ERR_UNAVAILABLE    5  /* the agent cannot be started or reached (database, socket, child process) */
#define DBOS_ERR_INTERNAL       6  /* a failure inside the library (a recovered panic); the handle is closed */

/* "libdbos <agent version> protocol <versions>"; static, never freed. */
const char *dbos_version(void);

/* Opens a handle from a config: a JSON object (first byte '{') or a
 * msgpack map (cgo/README.md, "The config"). */
int dbos_open(const void *config, size_t config_len, uint64_t *handle_out);

/* Sends one or more whole frames; blocks while the session's inbound bound
 * holds. A partial frame is DBOS_ERR_INVALID and sends nothing. */
int dbos_send(uint64_t handle, const void *bytes, size_t len);

/* Receives one or more whole frames (replies and pushes, in order), waiting
 * at most timeout_ms (< 0: until a frame or the end; 0: polls). The caller
 * frees *bytes_out with dbos_free. */
int dbos_recv(uint64_t handle, int32_t timeout_ms, void **bytes_out, size_t *len_out);

/* Frees what dbos_recv returned (NULL is ignored). */
void dbos_free(void *bytes);

/* Ends the session; a dbos_recv blocked on the handle returns DBOS_CLOSED. */
int dbos_close(uint64_t handle);

/* The message of this thread's last call if it failed ("" after a call
 * that succeeded); valid until this thread's next call. */
const char *dbos_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBDBOS_H */
