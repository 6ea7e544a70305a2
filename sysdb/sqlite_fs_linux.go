//go:build linux

package sysdb

import "golang.org/x/sys/unix"

const isDarwin = false

// networkFilesystems are the statfs magic numbers of filesystems whose
// locks SQLite cannot trust (sqlite.org/lockingv3.html, "How To Corrupt").
var networkFilesystems = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x01021997: "9p",
	0x5346414f: "afs",
	0x00c36400: "ceph",
	0x65735546: "fuse",
	0x47504653: "gpfs",
	0x0bd00bd0: "lustre",
}

// filesystemMagic is dir's filesystem type as statfs reports it; a variable
// so that a test can stand a network filesystem in for the local disk.
var filesystemMagic = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Type) & 0xffffffff, nil
}

// remoteFilesystem reports whether dir is on a network filesystem, and
// which.
func remoteFilesystem(dir string) (string, bool) {
	magic, err := filesystemMagic(dir)
	if err != nil {
		return "", false
	}
	name, ok := networkFilesystems[magic]
	return name, ok
}
