package sysdb_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// openSQLite opens a fresh system database file for one test, closed when
// it ends.
func openSQLite(t *testing.T) *sysdb.SQLite {
	t.Helper()
	db, err := sysdb.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "dbos.sqlite"), sysdb.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestSQLiteConformance(t *testing.T) {
	sysdbtest.Run(t, func(t *testing.T) sysdb.SystemDatabase { return openSQLite(t) })
}

func TestParseTarget(t *testing.T) {
	cwd, err := os.Getwd()
	require.NoError(t, err)
	for _, c := range []struct {
		url  string
		want sysdb.Target
	}{
		{"sqlite:///dbos.sqlite", sysdb.Target{Kind: sysdb.KindSQLite, Path: filepath.Join(cwd, "dbos.sqlite")}},
		{"sqlite:///data/app.db", sysdb.Target{Kind: sysdb.KindSQLite, Path: filepath.Join(cwd, "data/app.db")}},
		{"sqlite:////var/lib/dbos/app.db", sysdb.Target{Kind: sysdb.KindSQLite, Path: "/var/lib/dbos/app.db"}},
		{"postgres://u:p@h:5432/d?sslmode=disable", sysdb.Target{Kind: sysdb.KindPostgres, URL: "postgres://u:p@h:5432/d?sslmode=disable"}},
		{"postgresql://h/d", sysdb.Target{Kind: sysdb.KindPostgres, URL: "postgresql://h/d"}},
	} {
		got, err := sysdb.ParseTarget(c.url)
		require.NoError(t, err, c.url)
		require.Equal(t, c.want, got, c.url)
	}
	for _, bad := range []string{"", "sqlite://host/file", "sqlite:///", "sqlite:///:memory:", "sqlite:///f.db?mode=ro"} {
		_, err := sysdb.ParseTarget(bad)
		var cfg *sysdb.ConfigError
		require.ErrorAs(t, err, &cfg, "%q", bad)
	}
	// The URL SQLiteURL makes names the same file again.
	got, err := sysdb.ParseTarget(sysdb.SQLiteURL("/tmp/x/dbos.sqlite"))
	require.NoError(t, err)
	require.Equal(t, "/tmp/x/dbos.sqlite", got.Path)
}

func TestSQLiteDefaultPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", dir)
	path, err := sysdb.DefaultSQLitePath()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "dbos-agent", "dbos.sqlite"), path)
	t.Setenv("XDG_DATA_HOME", "relative/ignored") // the XDG spec: relative values are invalid
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	path, err = sysdb.DefaultSQLitePath()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, ".local", "share", "dbos-agent", "dbos.sqlite"), path)
}

// TestSQLiteExclusive: a second agent on a file refuses with a line naming
// the first's pid; shared opens (DBOS apps, the CLI) are not refused; the
// claim ends with the first's Close.
func TestSQLiteExclusive(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	first, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{Exclusive: true})
	require.NoError(t, err)
	_, err = sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{Exclusive: true})
	var served *sysdb.FileServedError
	require.ErrorAs(t, err, &served)
	require.Equal(t, os.Getpid(), served.PID)
	require.Contains(t, err.Error(), "already serves the SQLite system database "+path)
	shared, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{SkipMigrations: true})
	require.NoError(t, err)
	shared.Close()
	first.Close()
	again, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{Exclusive: true})
	require.NoError(t, err)
	again.Close()
}

// TestSQLiteSkipMigrationsNeedsTheFile: an operator command pointed at a
// wrong path says so and creates nothing.
func TestSQLiteSkipMigrationsNeedsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "dbos.sqlite")
	_, err := sysdb.OpenSQLite(context.Background(), path, sysdb.SQLiteOptions{SkipMigrations: true})
	var cfg *sysdb.ConfigError
	require.ErrorAs(t, err, &cfg)
	require.Contains(t, err.Error(), "no SQLite system database at "+path)
	_, statErr := os.Stat(filepath.Dir(path))
	require.ErrorIs(t, statErr, fs.ErrNotExist)
}

// TestSQLiteListenNoticesOtherWriters: a commit by another connection to
// the file (here a bare one, as a DBOS app's would be) is reported to
// listeners as a gap within the poll interval; nothing is reported while
// nobody writes.
func TestSQLiteListenNoticesOtherWriters(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	db, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer db.Close()
	gaps := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- db.Listen(ctx, []string{sysdb.ChannelQueue}, func(string, string) {},
			func() { gaps <- struct{}{} })
	}()
	<-gaps // the first gap comes at once: whatever happened before Listen
	select {
	case <-gaps:
		t.Fatal("a gap was reported with no write")
	case <-time.After(200 * time.Millisecond):
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "INSERT INTO queues (name, concurrency) VALUES ('other-writer', 1)")
	require.NoError(t, err)
	select {
	case <-gaps:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit by another connection was not noticed")
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestSQLiteListenWakesOnOwnWrites: a write through the database wakes its
// own listeners at once with the payload Postgres would notify (no poll:
// the poll interval here is an hour).
func TestSQLiteListenWakesOnOwnWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := sysdb.OpenSQLite(ctx, filepath.Join(t.TempDir(), "dbos.sqlite"), sysdb.SQLiteOptions{PollInterval: time.Hour})
	require.NoError(t, err)
	defer db.Close()
	got := make(chan string, 16)
	gapped := make(chan struct{})
	go func() {
		_ = db.Listen(ctx, []string{sysdb.ChannelQueue, sysdb.ChannelWorkflowStatus, sysdb.ChannelNotifications},
			func(channel, payload string) { got <- channel + " " + payload }, func() { close(gapped) })
	}()
	<-gapped // listening
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "wake-1", Name: "wf", Status: sysdb.StatusEnqueued, CreatorXID: sysdbtest.Token(),
		QueueName: sysdbtest.Ptr("wake-queue"), ExecutorID: "local",
	})
	require.NoError(t, err)
	require.Equal(t, sysdb.ChannelQueue+" wake-queue", <-got)
	_, err = db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "wake-1", Topic: sysdbtest.Ptr("t"), Message: `"hi"`},
	}})
	require.NoError(t, err)
	require.Equal(t, sysdb.ChannelNotifications+" wake-1::t", <-got)
}
