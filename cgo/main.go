// Command libdbos is built with -buildmode=c-shared into libdbos.so (make
// lib). These exports only convert C values: what they do is in
// internal/libdbos, and the functions of the contract (libdbos.h) are in
// shim.c, which checks for a forked child before calling them.
package main

/*
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>

char *dbos_library_dir(void);
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/dbos-agent/dbos-agent/internal/libdbos"
)

func main() {}

func init() {
	dir := C.dbos_library_dir()
	libdbos.LibraryDir = C.GoString(dir)
	C.free(unsafe.Pointer(dir))
}

// result sets *errOut (malloc'd; shim.c owns it) to err's message and
// returns its code.
func result(err error, errOut **C.char) C.int {
	if err != nil && errOut != nil {
		*errOut = C.CString(err.Error())
	}
	return C.int(libdbos.CodeOf(err))
}

func invalid(msg string) error { return &libdbos.Error{Code: libdbos.ErrInvalid, Msg: msg} }

//export go_dbos_version
func go_dbos_version() *C.char {
	// Made once (shim.c keeps it) and never freed: dbos_version's string
	// is static.
	return C.CString(libdbos.VersionString())
}

//export go_dbos_open
func go_dbos_open(config unsafe.Pointer, n C.size_t, handleOut *C.uint64_t, errOut **C.char) C.int {
	return result(libdbos.Default.Guard(0, func() error {
		if config == nil || handleOut == nil {
			return invalid("dbos_open: config and handle_out must not be NULL")
		}
		h, err := libdbos.Default.Open(C.GoBytes(config, C.int(n)))
		if err != nil {
			return err
		}
		*handleOut = C.uint64_t(h)
		return nil
	}), errOut)
}

//export go_dbos_send
func go_dbos_send(handle C.uint64_t, bytes unsafe.Pointer, n C.size_t, errOut **C.char) C.int {
	return result(libdbos.Default.Guard(uint64(handle), func() error {
		if bytes == nil && n > 0 {
			return invalid("dbos_send: bytes is NULL")
		}
		// The frames are read in place: Send copies what it keeps.
		var raw []byte
		if n > 0 {
			raw = unsafe.Slice((*byte)(bytes), int(n))
		}
		return libdbos.Default.Send(uint64(handle), raw)
	}), errOut)
}

//export go_dbos_recv
func go_dbos_recv(handle C.uint64_t, timeoutMS C.int32_t, bytesOut *unsafe.Pointer, lenOut *C.size_t, errOut **C.char) C.int {
	return result(libdbos.Default.Guard(uint64(handle), func() error {
		if bytesOut == nil || lenOut == nil {
			return invalid("dbos_recv: bytes_out and len_out must not be NULL")
		}
		*bytesOut, *lenOut = nil, 0
		timeout := time.Duration(timeoutMS) * time.Millisecond
		if timeoutMS < 0 {
			timeout = -1
		}
		frames, err := libdbos.Default.Recv(uint64(handle), timeout)
		if err != nil {
			return err
		}
		p := C.malloc(C.size_t(len(frames)))
		copy(unsafe.Slice((*byte)(p), len(frames)), frames)
		*bytesOut, *lenOut = p, C.size_t(len(frames))
		return nil
	}), errOut)
}

//export go_dbos_close
func go_dbos_close(handle C.uint64_t, errOut **C.char) C.int {
	return result(libdbos.Default.Guard(uint64(handle), func() error {
		return libdbos.Default.Close(uint64(handle))
	}), errOut)
}

//export go_dbos_at_exit
func go_dbos_at_exit() {
	_ = libdbos.Default.Guard(0, func() error {
		libdbos.Default.AtExit()
		return nil
	})
}
