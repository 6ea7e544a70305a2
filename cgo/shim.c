// The C side of libdbos.so: the functions of libdbos.h. Each checks, before
// entering the Go runtime, that this is the process that loaded the library
// (a child after fork() has none of the runtime's threads, so entering Go
// there can hang), keeps this thread's last error, and calls the Go export
// of the same name with a "go_" prefix.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libdbos.h"
#include "_cgo_export.h"

// load_pid is the process that loaded the library (and started its Go
// runtime).
static pid_t load_pid;

// at_exit stops the sidecar children of this process when it exits
// normally (a crashed host leaves its child for a successor to reattach).
static void at_exit(void) {
	if (getpid() == load_pid) {
		go_dbos_at_exit();
	}
}

__attribute__((constructor)) static void dbos_load(void) {
	load_pid = getpid();
	atexit(at_exit);
}

// dbos_library_dir is the directory libdbos.so was loaded from (sidecar
// mode looks for dbos-agent there), or "" when unknown. Malloc'd.
char *dbos_library_dir(void) {
	Dl_info info;
	if (dladdr((void *)dbos_version, &info) == 0 || info.dli_fname == NULL) {
		return strdup("");
	}
	char *dir = strdup(info.dli_fname);
	char *slash = strrchr(dir, '/');
	if (slash == NULL) {
		dir[0] = '\0';
	} else {
		*slash = '\0';
	}
	return dir;
}

// The last error of each thread: malloc'd, freed at the thread's next call
// or its exit.
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;

static void make_error_key(void) { pthread_key_create(&error_key, free); }

static void set_error(char *msg) {
	pthread_once(&error_once, make_error_key);
	free(pthread_getspecific(error_key));
	pthread_setspecific(error_key, msg);
}

const char *dbos_last_error(void) {
	pthread_once(&error_once, make_error_key);
	const char *msg = pthread_getspecific(error_key);
	return msg ? msg : "";
}

// forked says whether this is a child of the process that loaded the
// library, setting the error if so.
static int forked(uint64_t handle) {
	pid_t pid = getpid();
	if (pid == load_pid) {
		return 0;
	}
	char buf[400];
	if (handle != 0) {
		snprintf(buf, sizeof buf,
			 "handle 0x%llx was opened by process %lld; this process (%lld) is a child after fork(), "
			 "and the library's Go runtime does not survive a fork: load the library and open "
			 "its handles only after forking (under gunicorn: no --preload, or open in post_fork)",
			 (unsigned long long)handle, (long long)(handle >> 32), (long long)pid);
	} else {
		snprintf(buf, sizeof buf,
			 "libdbos was loaded by process %lld; this process (%lld) is a child after fork(), "
			 "and the library's Go runtime does not survive a fork: load the library and open "
			 "its handles only after forking (under gunicorn: no --preload, or open in post_fork)",
			 (long long)load_pid, (long long)pid);
	}
	set_error(strdup(buf));
	return 1;
}

static const char *version;
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void make_version(void) { version = go_dbos_version(); }

const char *dbos_version(void) {
	if (getpid() != load_pid) {
		// Made by the parent before the fork, or not at all: a child
		// cannot enter Go to make it.
		return version != NULL ? version : "libdbos (version unavailable in a child after fork())";
	}
	pthread_once(&version_once, make_version);
	return version;
}

int dbos_open(const void *config, size_t config_len, uint64_t *handle_out) {
	if (forked(0)) {
		return DBOS_ERR_FORKED;
	}
	char *err = NULL;
	int rc = go_dbos_open((void *)config, config_len, handle_out, &err);
	set_error(err);
	return rc;
}

int dbos_send(uint64_t handle, const void *bytes, size_t len) {
	if (forked(handle)) {
		return DBOS_ERR_FORKED;
	}
	char *err = NULL;
	int rc = go_dbos_send(handle, (void *)bytes, len, &err);
	set_error(err);
	return rc;
}

int dbos_recv(uint64_t handle, int32_t timeout_ms, void **bytes_out, size_t *len_out) {
	if (forked(handle)) {
		return DBOS_ERR_FORKED;
	}
	char *err = NULL;
	int rc = go_dbos_recv(handle, timeout_ms, bytes_out, len_out, &err);
	set_error(err);
	return rc;
}

void dbos_free(void *bytes) { free(bytes); }

int dbos_close(uint64_t handle) {
	if (forked(handle)) {
		return DBOS_ERR_FORKED;
	}
	char *err = NULL;
	int rc = go_dbos_close(handle, &err);
	set_error(err);
	return rc;
}
