// dlopen_test loads libdbos.so with dlopen, uses it, closes its handle,
// unloads it and does it all again: a host may load the library more than
// once in one process. Like Python, it installs its SIGINT handler before
// it loads the library, and checks the handler still gets SIGINT. argv[1] is the library; the environment is
// libdbos_test.c's (DBOS_TEST_CONFIG, DBOS_TEST_PING, DBOS_TEST_PING_REPLY,
// DBOS_TEST_HELLO).
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdbos.h"

static unsigned char *from_hex(const char *name, size_t *n) {
	const char *hex = getenv(name);
	if (hex == NULL) {
		fprintf(stderr, "%s is not set\n", name);
		exit(2);
	}
	*n = strlen(hex) / 2;
	unsigned char *b = malloc(*n);
	for (size_t i = 0; i < *n; i++) {
		sscanf(hex + 2 * i, "%2hhx", &b[i]);
	}
	return b;
}

#define LOAD(lib, name) \
	__typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name); \
	if (p_##name == NULL) { fprintf(stderr, "dlsym %s: %s\n", #name, dlerror()); return 1; }

static int load_and_use(const char *path, int i) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "dlopen %d: %s\n", i, dlerror());
		return 1;
	}
	LOAD(lib, dbos_version)
	LOAD(lib, dbos_open)
	LOAD(lib, dbos_send)
	LOAD(lib, dbos_recv)
	LOAD(lib, dbos_free)
	LOAD(lib, dbos_close)
	LOAD(lib, dbos_last_error)
	const char *config = getenv("DBOS_TEST_CONFIG");
	size_t hn, pn, rn;
	unsigned char *hello = from_hex("DBOS_TEST_HELLO", &hn);
	unsigned char *ping = from_hex("DBOS_TEST_PING", &pn);
	unsigned char *reply = from_hex("DBOS_TEST_PING_REPLY", &rn);
	printf("round %d: %s\n", i, p_dbos_version());
	uint64_t h = 0;
	int rc = p_dbos_open(config, strlen(config), &h);
	if (rc != DBOS_OK) {
		fprintf(stderr, "round %d: dbos_open: %d %s\n", i, rc, p_dbos_last_error());
		return 1;
	}
	int ok = 1;
	for (int k = 0; k < 2; k++) {
		rc = p_dbos_send(h, k == 0 ? hello : ping, k == 0 ? hn : pn);
		void *p = NULL;
		size_t n = 0;
		int rrc = p_dbos_recv(h, 10000, &p, &n);
		ok &= rc == DBOS_OK && rrc == DBOS_OK;
		if (k == 1) {
			ok &= n == rn && memcmp(p, reply, rn) == 0;
		}
		p_dbos_free(p);
	}
	ok &= p_dbos_close(h) == DBOS_OK;
	if (dlclose(lib) != 0) {
		fprintf(stderr, "dlclose %d: %s\n", i, dlerror());
		ok = 0;
	}
	free(hello);
	free(ping);
	free(reply);
	return ok ? 0 : 1;
}

static volatile sig_atomic_t got_sigint;
static void on_sigint(int sig) { (void)sig; got_sigint++; }

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: dlopen_test libdbos.so\n");
		return 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	int failed = 0;
	for (int i = 1; i <= 2; i++) {
		failed += load_and_use(argv[1], i);
		raise(SIGINT);
		if (got_sigint != i) {
			fprintf(stderr, "round %d: SIGINT did not reach the host's handler\n", i);
			failed++;
		}
	}
	printf("%d passed, %d failed\n", 4 - failed, failed);
	return failed == 0 ? 0 : 1;
}
