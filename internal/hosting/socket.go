package hosting

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultSocketPath is serve's default socket, private to the user: in the user's runtime
// directory when there is one that is theirs alone, else in a directory of
// their own (made 0700) under the temp directory. The Python binding
// computes the same path.
func DefaultSocketPath() string {
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" && privateDir(dir) {
		return filepath.Join(dir, "dbos-agent.sock")
	}
	return filepath.Join(os.TempDir(), "dbos-agent-"+strconv.Itoa(os.Getuid()), "agent.sock")
}

// privateDir says whether dir is a directory of this user that neither
// group nor others may write. server.Listen checks more (every directory
// on the way); this only picks the default.
func privateDir(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Getuid()) && fi.Mode().Perm()&0o022 == 0
}
