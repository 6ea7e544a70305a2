package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// UnsafePathError refuses a socket path that another user could tamper
// with: whoever can write the socket's directory (or rename a directory or
// symlink on the way to it) can put a socket of their own in the agent's
// place, and every application that connects then talks to them. The rule
// is ssh-agent's and tmux's: the socket's directory belongs to the agent's
// user and nobody else may write it; every directory above it belongs to
// root or that user and is not writable by others unless sticky (as /tmp
// is); every symlink followed belongs to root or that user.
type UnsafePathError struct {
	// Path is the directory, symlink or socket file refused.
	Path string
	// What names it: "socket directory", "directory", "symlink", "socket".
	What string
	// UID and Mode are its owner and its permission bits (with setuid,
	// setgid and sticky).
	UID  uint32
	Mode uint32
	// Want says what it must be.
	Want string
}

func (e *UnsafePathError) Error() string {
	what := describeUID(e.UID)
	if e.What != "symlink" { // a symlink's own mode means nothing
		what += fmt.Sprintf(", mode %04o", e.Mode)
	}
	return fmt.Sprintf("unsafe %s %s (owner %s): it must be %s; remove it (as its owner or root) or put the socket in a directory of your own",
		e.What, e.Path, what, e.Want)
}

// describeUID is "uid 65534 (nobody)", or "uid 65534" when the name is
// unknown.
func describeUID(uid uint32) string {
	s := "uid " + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		s += " (" + u.Username + ")"
	}
	return s
}

// maxSymlinks bounds the symlinks followed, as the kernel's ELOOP does.
const maxSymlinks = 40

// PrepareSocketPath makes socketPath's directory ready for the agent's
// socket and returns the socket path with every symlink resolved, which is
// where the agent listens: the path it checked, whatever a symlink says
// later. A missing directory is created with mode 0700, missing parents
// too. A directory, symlink or existing socket file another user could
// tamper with is refused with an *UnsafePathError, and a file that is not
// a socket is an error too.
func PrepareSocketPath(socketPath string) (string, error) {
	if socketPath == "" {
		return "", errors.New("no socket path")
	}
	// Split without filepath.Clean: "link/.." means the parent of the
	// link's target to the kernel, not the link's own directory.
	abs := socketPath
	if !strings.HasPrefix(abs, "/") {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("socket path %s: %w", socketPath, err)
		}
		abs = wd + "/" + abs
	}
	i := strings.LastIndex(abs, "/")
	base := abs[i+1:]
	if base == "" || base == "." || base == ".." {
		return "", fmt.Errorf("socket path %s does not name a file", socketPath)
	}
	dir, err := resolvePrivateDir(abs[:i])
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, base)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, nil
	case err != nil:
		return "", fmt.Errorf("socket %s: %w", path, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return "", fmt.Errorf("%s exists and is not a socket", path)
	}
	// Only its owner, or root, could have put a socket in a private
	// directory; the agent replaces only its own.
	if uid, owner := uint32(os.Getuid()), ownerOf(fi); owner != uid {
		return "", &UnsafePathError{Path: path, What: "socket", UID: owner, Mode: modeOf(fi), Want: "owned by " + describeUID(uid)}
	}
	return path, nil
}

// rootOr is who may own what is above the socket: root, and the agent's
// user.
func rootOr(uid uint32) string {
	if uid == 0 {
		return describeUID(0)
	}
	return "root or " + describeUID(uid)
}

// resolvePrivateDir walks dir one component at a time as the kernel
// resolves it, creating what is missing (mode 0700), checking each
// directory it looks a name up in and each symlink it follows, and finally
// the directory itself. It returns dir with every symlink resolved.
func resolvePrivateDir(dir string) (string, error) {
	uid := uint32(os.Getuid())
	pending := strings.Split(dir, "/")
	cur := "/"
	links := 0
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		// Whoever may write cur may rename or replace the entry looked up.
		if err := checkHolder(cur, uid); err != nil {
			return "", err
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			fi, err = makePrivateDir(next)
		}
		if err != nil {
			return "", fmt.Errorf("socket directory %s: %w", dir, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if owner := ownerOf(fi); owner != 0 && owner != uid {
				return "", &UnsafePathError{Path: next, What: "symlink", UID: owner, Mode: modeOf(fi),
					Want: "owned by " + rootOr(uid)}
			}
			if links++; links > maxSymlinks {
				return "", fmt.Errorf("socket directory %s: too many levels of symbolic links", dir)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("socket directory %s: %w", dir, err)
			}
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			pending = append(strings.Split(target, "/"), pending...)
			continue
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("socket directory %s: %s is not a directory", dir, next)
		}
		cur = next
	}
	fi, err := os.Lstat(cur)
	if err != nil {
		return "", fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if owner, mode := ownerOf(fi), modeOf(fi); owner != uid || mode&0o022 != 0 {
		return "", &UnsafePathError{Path: cur, What: "socket directory", UID: owner, Mode: mode,
			Want: "owned by " + describeUID(uid) + " and not writable by group or others"}
	}
	return cur, nil
}

// makePrivateDir creates dir with mode 0700 (whatever the umask), or takes
// what someone else created there meanwhile, to be checked like anything
// found.
func makePrivateDir(dir string) (fs.FileInfo, error) {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		// Only this user or root can write the directory holding dir (its
		// holder was checked), so dir is still the one just made.
		err = os.Chmod(dir, 0o700)
	} else if errors.Is(err, fs.ErrExist) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return os.Lstat(dir)
}

// checkHolder refuses a directory above the socket's that another user
// owns, or may write without the sticky bit (which keeps others from
// renaming or removing entries they do not own).
func checkHolder(dir string, uid uint32) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	owner, mode := ownerOf(fi), modeOf(fi)
	if (owner != 0 && owner != uid) || (mode&0o022 != 0 && mode&syscall.S_ISVTX == 0) {
		return &UnsafePathError{Path: dir, What: "directory", UID: owner, Mode: mode,
			Want: "owned by " + rootOr(uid) + ", and not writable by group or others unless sticky"}
	}
	return nil
}

func ownerOf(fi fs.FileInfo) uint32 {
	return fi.Sys().(*syscall.Stat_t).Uid
}

// modeOf is the permission bits as chmod takes them (sticky included).
func modeOf(fi fs.FileInfo) uint32 {
	return fi.Sys().(*syscall.Stat_t).Mode & 0o7777
}
