// Package libdbos is what libdbos.so does, behind its thin cgo exports: the
// handles, their config, the three modes (embedded, connect, sidecar) and the
// framing between the host's bytes and a session. Everything here is
// testable from Go; the cgo package only converts C values.
package libdbos

import (
	"errors"
	"fmt"
)

// The codes of the C ABI (libdbos.h): every call returns one.
const (
	OK             = 0
	Timeout        = 1
	Closed         = 2
	ErrInvalid     = 3
	ErrForked      = 4
	ErrUnavailable = 5
	ErrInternal    = 6
)

// Error is a failure with the code the C caller gets.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// errTimeout and errClosed are the two non-failures a recv can end with.
var (
	errTimeout = &Error{Code: Timeout, Msg: "no frame arrived within the timeout"}
	errClosed  = &Error{Code: Closed, Msg: "the session ended: no more frames"}
)

// CodeOf is the C code of err (nil is OK; an error without a code is
// internal).
func CodeOf(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrInternal
}
