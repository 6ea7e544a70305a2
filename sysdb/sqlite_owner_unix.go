//go:build unix

package sysdb

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownerLock is the exclusive claim an agent holds on a SQLite file it
// serves: a lock file beside it, flock(2)ed for the life of the process (the
// kernel drops it when the process dies, however it dies), holding the
// holder's pid for the refusal message. DBOS apps and the CLI open the
// database without it.
type ownerLock struct{ f *os.File }

// FileServedError says another agent serves the SQLite file already.
type FileServedError struct {
	Path string
	PID  int // 0 when unknown
}

func (e *FileServedError) Error() string {
	holder := "another dbos-agent"
	if e.PID > 0 {
		holder += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return holder + " already serves the SQLite system database " + e.Path +
		": one agent per file; connect to that agent's socket, or give this one another file or a Postgres URL"
}

func lockOwner(path string) (*ownerLock, error) {
	lockPath := path + ".agent-lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", lockPath, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		raw, _ := os.ReadFile(lockPath)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
			return nil, &FileServedError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &ownerLock{f: f}, nil
}

func (l *ownerLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing the descriptor drops the flock
	}
}
