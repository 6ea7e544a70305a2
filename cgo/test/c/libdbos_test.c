// libdbos_test checks libdbos.so through its header alone, as a C host
// would use it. The Go test beside it (../ctest_test.go) builds it with gcc
// against libdbos.h, links it to libdbos.so and runs it once per mode. Its
// frames come from the protocol's golden vectors, as hex in the
// environment:
//
//   DBOS_TEST_CONFIG       the JSON config of the handle to test
//   DBOS_TEST_HELLO        a client hello frame (id 1)
//   DBOS_TEST_HELLO_REPLY  the head of a successful reply to it, after the
//                          length prefix
//   DBOS_TEST_PING         a ping frame (id 2)
//   DBOS_TEST_PING_REPLY   the whole reply to it
//   DBOS_TEST_SIGTERM      when set: open, say "ready", wait for a signal
//   DBOS_TEST_AGENT_GONE   when set: open, say "ready", wait for a line on
//                          stdin (the agent has been stopped), then check
//                          the handle reports the end and the host lives
//
// It prints "N passed, N failed" and exits non-zero on any failure.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libdbos.h"

static int passed, failed;

#define CHECK(cond, ...)                                   \
	do {                                               \
		if (cond) {                                \
			passed++;                          \
		} else {                                   \
			failed++;                          \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);      \
			fprintf(stderr, " (last error: %s)\n", dbos_last_error()); \
		}                                          \
	} while (0)

typedef struct {
	unsigned char *b;
	size_t n;
} bytes;

static bytes from_hex(const char *name) {
	const char *hex = getenv(name);
	bytes out = {0};
	if (hex == NULL) {
		fprintf(stderr, "%s is not set\n", name);
		exit(2);
	}
	out.n = strlen(hex) / 2;
	out.b = malloc(out.n + 1);
	for (size_t i = 0; i < out.n; i++) {
		sscanf(hex + 2 * i, "%2hhx", &out.b[i]);
	}
	return out;
}

static const char *need(const char *name) {
	const char *v = getenv(name);
	if (v == NULL) {
		fprintf(stderr, "%s is not set\n", name);
		exit(2);
	}
	return v;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// roundtrip sends a frame and receives the reply; returns the reply (the
// caller frees it) or NULL.
static bytes roundtrip(uint64_t h, bytes frame) {
	bytes reply = {0};
	int rc = dbos_send(h, frame.b, frame.n);
	CHECK(rc == DBOS_OK, "dbos_send: %d", rc);
	void *p = NULL;
	size_t n = 0;
	rc = dbos_recv(h, 10000, &p, &n);
	CHECK(rc == DBOS_OK, "dbos_recv: %d", rc);
	reply.b = p;
	reply.n = n;
	return reply;
}

static int contains(bytes hay, const char *needle) {
	return memmem(hay.b, hay.n, needle, strlen(needle)) != NULL;
}

struct blocked {
	uint64_t h;
	int rc;
	double waited;
	volatile int started;
};

static void *recv_forever(void *arg) {
	struct blocked *b = arg;
	void *p = NULL;
	size_t n = 0;
	double t0 = now();
	b->started = 1;
	b->rc = dbos_recv(b->h, -1, &p, &n);
	b->waited = now() - t0;
	dbos_free(p);
	return NULL;
}

static volatile sig_atomic_t got_sigint;
static void on_sigint(int sig) { (void)sig; got_sigint = 1; }

int main(void) {
	const char *config = need("DBOS_TEST_CONFIG");
	bytes hello = from_hex("DBOS_TEST_HELLO");
	bytes hello_reply = from_hex("DBOS_TEST_HELLO_REPLY");
	bytes ping = from_hex("DBOS_TEST_PING");
	bytes ping_reply = from_hex("DBOS_TEST_PING_REPLY");

	const char *version = dbos_version();
	printf("dbos_version: %s\n", version);
	CHECK(strncmp(version, "libdbos ", 8) == 0 && strstr(version, " protocol ") != NULL, "version %s", version);

	uint64_t h = 0;
	int rc = dbos_open(config, strlen(config), &h);
	CHECK(rc == DBOS_OK && h != 0, "dbos_open(%s): %d", config, rc);
	if (rc != DBOS_OK) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	CHECK(strcmp(dbos_last_error(), "") == 0, "no error after a successful call");

	if (getenv("DBOS_TEST_SIGTERM") != NULL) {
		// The Go test sends SIGTERM or SIGINT: its default action must
		// still end the host.
		bytes r = roundtrip(h, hello);
		dbos_free(r.b);
		printf("ready\n");
		fflush(stdout);
		for (;;) {
			pause();
		}
	}

	if (getenv("DBOS_TEST_AGENT_GONE") != NULL) {
		bytes r = roundtrip(h, hello);
		dbos_free(r.b);
		printf("ready\n");
		fflush(stdout);
		char line[16];
		if (fgets(line, sizeof line, stdin) == NULL) {
			return 2;
		}
		void *p = NULL;
		size_t n = 0;
		rc = dbos_recv(h, 10000, &p, &n);
		CHECK(rc == DBOS_CLOSED, "recv once the agent is gone: %d", rc);
		// A write to the dead socket fails (the host is not killed by
		// SIGPIPE); the first may still be buffered by the kernel.
		for (int i = 0; i < 3 && (rc = dbos_send(h, ping.b, ping.n)) == DBOS_OK; i++) {
		}
		CHECK(rc == DBOS_CLOSED && dbos_last_error()[0] != '\0', "send once the agent is gone: %d", rc);
		rc = dbos_close(h);
		CHECK(rc == DBOS_OK, "close once the agent is gone: %d", rc);
		printf("%d passed, %d failed\n", passed, failed);
		return failed == 0 ? 0 : 1;
	}

	// The handshake and a ping.
	bytes r = roundtrip(h, hello);
	CHECK(r.n >= 4 + hello_reply.n && memcmp(r.b + 4, hello_reply.b, hello_reply.n) == 0 && !contains(r, "error"),
	      "hello reply (%zu bytes) is not a successful reply to id 1", r.n);
	dbos_free(r.b);
	r = roundtrip(h, ping);
	CHECK(r.n == ping_reply.n && memcmp(r.b, ping_reply.b, r.n) == 0, "ping reply (%zu bytes) differs from the golden one", r.n);
	dbos_free(r.b);

	// A partial frame is refused and ends nothing else.
	rc = dbos_send(h, ping.b, ping.n - 1);
	CHECK(rc == DBOS_ERR_INVALID && strstr(dbos_last_error(), "partial") != NULL, "partial frame: %d", rc);
	rc = dbos_send(h, ping.b, 3);
	CHECK(rc == DBOS_ERR_INVALID && dbos_last_error()[0] != '\0', "3 bytes: %d", rc);
	rc = dbos_send(h, NULL, 5);
	CHECK(rc == DBOS_ERR_INVALID && dbos_last_error()[0] != '\0', "NULL bytes: %d", rc);
	r = roundtrip(h, ping);
	CHECK(r.n == ping_reply.n && memcmp(r.b, ping_reply.b, r.n) == 0, "ping after a partial frame");
	dbos_free(r.b);

	// A whole frame of garbage goes through: the agent answers it with
	// malformed_frame, as on the socket, and the session goes on.
	unsigned char garbage[] = {0, 0, 0, 4, 0xc1, 0xc1, 0xc1, 0xc1};
	bytes g = {garbage, sizeof garbage};
	r = roundtrip(h, g);
	CHECK(contains(r, "error") && contains(r, "malformed_frame"), "garbage frame: reply of %zu bytes without malformed_frame", r.n);
	dbos_free(r.b);
	r = roundtrip(h, ping);
	CHECK(r.n == ping_reply.n && memcmp(r.b, ping_reply.b, r.n) == 0, "ping after garbage");
	dbos_free(r.b);

	// Two frames in one send, and their replies.
	bytes two = {malloc(2 * ping.n), 2 * ping.n};
	memcpy(two.b, ping.b, ping.n);
	memcpy(two.b + ping.n, ping.b, ping.n);
	rc = dbos_send(h, two.b, two.n);
	CHECK(rc == DBOS_OK, "two frames: %d", rc);
	size_t got = 0;
	while (got < 2 * ping_reply.n) {
		void *p = NULL;
		size_t n = 0;
		rc = dbos_recv(h, 10000, &p, &n);
		CHECK(rc == DBOS_OK && n % ping_reply.n == 0, "recv of two replies: %d, %zu bytes", rc, n);
		if (rc != DBOS_OK) {
			break;
		}
		got += n;
		dbos_free(p);
	}
	free(two.b);

	// Timeouts.
	void *p = NULL;
	size_t n = 0;
	double t0 = now();
	rc = dbos_recv(h, 0, &p, &n);
	CHECK(rc == DBOS_TIMEOUT && p == NULL, "poll: %d", rc);
	rc = dbos_recv(h, 200, &p, &n);
	double waited = now() - t0;
	CHECK(rc == DBOS_TIMEOUT && waited >= 0.19 && waited < 5, "recv(200 ms): %d after %.3f s", rc, waited);
	rc = dbos_recv(h, 100, NULL, &n);
	CHECK(rc == DBOS_ERR_INVALID, "recv into NULL: %d", rc);

	// Bad handles and bad configs.
	rc = dbos_send(12345, ping.b, ping.n);
	CHECK(rc == DBOS_ERR_INVALID && strstr(dbos_last_error(), "handle") != NULL, "unknown handle: %d", rc);
	rc = dbos_close(12345);
	CHECK(rc == DBOS_ERR_INVALID, "close of an unknown handle: %d", rc);
	const char *bad[] = {"{\"mode\": \"nope\"}", "{\"no_such_key\": 1}", "{\"mode\": \"embedded\", \"socket\": \"/s\"}", "{", "\x81\xa4mode\xa3odd", ""};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t other = 0;
		rc = dbos_open(bad[i], strlen(bad[i]), &other);
		CHECK(rc == DBOS_ERR_INVALID && dbos_last_error()[0] != '\0' && other == 0, "bad config %zu: %d", i, rc);
	}
	rc = dbos_open(config, strlen(config), NULL);
	CHECK(rc == DBOS_ERR_INVALID, "open into NULL: %d", rc);

	// The host's signals are its own: a SIGINT reaches a handler the host
	// installs with the library running (dlopen_test installs one before
	// loading it, as Python does; the signal runs check the default
	// actions of SIGINT and SIGTERM).
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	raise(SIGINT);
	CHECK(got_sigint == 1, "SIGINT did not reach the host's handler");

	// fork(): the child's calls are refused, before entering Go.
	pid_t child = fork();
	if (child == 0) {
		int ok = 1;
		int crc = dbos_send(h, ping.b, ping.n);
		ok &= crc == DBOS_ERR_FORKED && strstr(dbos_last_error(), "fork") != NULL;
		if (!ok) {
			fprintf(stderr, "child: dbos_send %d: %s\n", crc, dbos_last_error());
		}
		fprintf(stderr, "child's dbos_send: %s\n", dbos_last_error());
		void *cp = NULL;
		size_t cn = 0;
		ok &= dbos_recv(h, -1, &cp, &cn) == DBOS_ERR_FORKED;
		ok &= dbos_close(h) == DBOS_ERR_FORKED;
		uint64_t ch = 0;
		ok &= dbos_open(config, strlen(config), &ch) == DBOS_ERR_FORKED && ch == 0;
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child's calls were not all refused (status %d)", status);
	r = roundtrip(h, ping);
	CHECK(r.n == ping_reply.n && memcmp(r.b, ping_reply.b, r.n) == 0, "ping in the parent after fork");
	dbos_free(r.b);

	// A second handle of the same config shares the engine; closing it
	// from another thread wakes a recv blocked on it.
	uint64_t h2 = 0;
	rc = dbos_open(config, strlen(config), &h2);
	CHECK(rc == DBOS_OK && h2 != h, "second handle: %d", rc);
	r = roundtrip(h2, hello);
	dbos_free(r.b);
	struct blocked b = {.h = h2};
	pthread_t th;
	pthread_create(&th, NULL, recv_forever, &b);
	while (!b.started) {
		usleep(1000);
	}
	usleep(200 * 1000); // let it reach its wait inside dbos_recv
	t0 = now();
	rc = dbos_close(h2);
	pthread_join(th, NULL);
	double woke = now() - t0;
	CHECK(rc == DBOS_OK, "close of the second handle: %d", rc);
	CHECK(b.rc == DBOS_CLOSED && woke < 5, "the blocked recv returned %d, %.3f s after the close", b.rc, woke);
	r = roundtrip(h, ping);
	CHECK(r.n == ping_reply.n && memcmp(r.b, ping_reply.b, r.n) == 0, "ping on the first handle after the second closed");
	dbos_free(r.b);

	rc = dbos_close(h);
	CHECK(rc == DBOS_OK, "close: %d", rc);
	rc = dbos_close(h);
	CHECK(rc == DBOS_ERR_INVALID && strstr(dbos_last_error(), "handle") != NULL, "second close: %d", rc);
	rc = dbos_send(h, ping.b, ping.n);
	CHECK(rc == DBOS_ERR_INVALID, "send on a closed handle: %d", rc);

	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
