//go:build !unix

package sysdb

import "strconv"

// ownerLock is unix-only (flock); elsewhere an Exclusive open is not
// guarded against a second agent.
type ownerLock struct{}

// FileServedError says another agent serves the SQLite file already.
type FileServedError struct {
	Path string
	PID  int
}

func (e *FileServedError) Error() string {
	return "another dbos-agent (pid " + strconv.Itoa(e.PID) + ") already serves the SQLite system database " + e.Path
}

func lockOwner(string) (*ownerLock, error) { return &ownerLock{}, nil }

func (*ownerLock) release() {}
