// Package peercred reads who is at the other end of a Unix socket
// (SO_PEERCRED), which the agent checks of the applications that connect
// and the clients check of the agent they connect to.
package peercred

import (
	"net"
	"os"
	"slices"
	"syscall"
)

// Of returns the peer's pid, uid and gid as the kernel recorded them: at
// connect for a client, at listen for a server.
func Of(conn *net.UnixConn) (*syscall.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err != nil {
		return nil, err
	}
	return cred, credErr
}

// Trusted says whether a peer may be trusted as an agent or an application
// of this user: it is root, this process's own user, or one of extra.
func Trusted(cred *syscall.Ucred, extra []uint32) bool {
	if cred.Uid == 0 || cred.Uid == uint32(os.Getuid()) {
		return true
	}
	return slices.Contains(extra, cred.Uid)
}
