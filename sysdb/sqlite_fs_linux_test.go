//go:build linux

package sysdb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestSQLiteWarnsOfANetworkFilesystem: a file whose directory statfs calls
// NFS opens (SQLite works there until two processes lock at once) with one
// warning naming the file and the filesystem; a local disk opens without.
// No NFS mount is at hand in a test, so statfs is answered for the test's
// directory alone: the rest (the warning's words, OpenSQLite going on) is
// the real code.
func TestSQLiteWarnsOfANetworkFilesystem(t *testing.T) {
	local := t.TempDir()
	remote := t.TempDir()
	statfs := filesystemMagic
	t.Cleanup(func() { filesystemMagic = statfs })
	filesystemMagic = func(dir string) (int64, error) {
		if dir == remote {
			return 0x6969, nil // NFS_SUPER_MAGIC
		}
		return statfs(dir)
	}
	for _, c := range []struct {
		dir  string
		warn bool
	}{{remote, true}, {local, false}} {
		core, logs := observer.New(zapcore.WarnLevel)
		path := filepath.Join(c.dir, "dbos.sqlite")
		db, err := OpenSQLite(context.Background(), path, SQLiteOptions{Logger: zap.New(core)})
		require.NoError(t, err)
		db.Close()
		warnings := logs.FilterMessageSnippet("network filesystem").All()
		if !c.warn {
			require.Empty(t, warnings, c.dir)
			continue
		}
		require.Len(t, warnings, 1)
		fields := warnings[0].ContextMap()
		require.Equal(t, path, fields["path"])
		require.Equal(t, "nfs", fields["filesystem"])
	}
}
