//go:build !linux

package sysdb

import "runtime"

var isDarwin = runtime.GOOS == "darwin"

// remoteFilesystem is known on Linux only; elsewhere nothing is warned.
func remoteFilesystem(string) (string, bool) { return "", false }
