package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
)

// envInt reads a positive integer from the environment, or returns def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sdkLogger shows the Go SDK's warnings only with -v.
func sdkLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newSDKSchema is a fresh schema for the Go SDK (it migrates it itself).
func newSDKSchema(b *testing.B) (string, string) {
	return pgtest.URL(b), pgtest.Schema(b)
}

// newSDKContext makes a DBOS context of application "bench" on schema; it
// is shut down (before the schema is dropped) when the benchmark ends.
func newSDKContext(b *testing.B, url, schema string) dbos.Context {
	b.Helper()
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{
		AppName:        "bench",
		DatabaseURL:    url,
		DatabaseSchema: schema,
		Logger:         sdkLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dbos.Shutdown(ctx, 30*time.Second) })
	return ctx
}

// newSDKClient connects the Go SDK's client to a migrated schema.
func newSDKClient(b *testing.B, url, schema string) dbos.Client {
	b.Helper()
	c, err := dbos.NewClient(context.Background(), dbos.ClientConfig{
		DatabaseURL:    url,
		DatabaseSchema: schema,
		AppName:        "bench",
		Logger:         sdkLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dbos.Shutdown(c, 30*time.Second) })
	return c
}

func countStatus(b *testing.B, conn *pgx.Conn, schema, status string) int {
	b.Helper()
	var n int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM "+pgx.Identifier{schema, "workflow_status"}.Sanitize()+" WHERE queue_name = $1 AND status = $2",
		benchQueueName, status).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// requireCount checks that n workflows of the bench queue have status.
func requireCount(b *testing.B, url, schema, status string, n int) {
	b.Helper()
	conn := pgtest.Connect(b, url)
	if got := countStatus(b, conn, schema, status); got != n {
		b.Fatalf("%d workflows %s on %s, want %d", got, status, schema, n)
	}
}

// waitAllSucceeded returns once SQL shows n workflows of the bench queue
// SUCCESS. Callers call it once every workflow has started, so it waits for
// the last outcomes' commits only.
func waitAllSucceeded(b *testing.B, url, schema string, n int) {
	b.Helper()
	conn := pgtest.Connect(b, url)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := countStatus(b, conn, schema, "SUCCESS")
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			b.Fatalf("%d workflows SUCCESS on %s, want %d", got, schema, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// benchPostgresCommitRate is the reference: n single-row UPDATE commits (the
// shape of a workflow's outcome) from 16 connections, on a table like
// workflow_status.
func benchPostgresCommitRate(b *testing.B, n int) drainResult {
	return postgresCommitRate(b, n, false)
}

// benchPostgresNotifyCommitRate is the same with a pg_notify in each
// statement, as a finish that notifies its waiters at commit: Postgres
// holds its notification queue lock from before the commit until after it,
// so such commits do not share WAL flushes.
func benchPostgresNotifyCommitRate(b *testing.B, n int) drainResult {
	return postgresCommitRate(b, n, true)
}

func postgresCommitRate(b *testing.B, n int, notify bool) drainResult {
	b.StopTimer()
	url, schema := pgtest.URL(b), pgtest.Schema(b)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	table := pgx.Identifier{schema, "t"}.Sanitize()
	for _, q := range []string{
		"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + table + " (id text PRIMARY KEY, status text NOT NULL, output text, updated_at bigint)",
		"INSERT INTO " + table + " SELECT 'd-' || i, 'PENDING', NULL, 0 FROM generate_series(0, " + strconv.Itoa(n-1) + ") i",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	update := "UPDATE " + table + " SET status = 'SUCCESS', output = NULL, updated_at = $2 WHERE id = $1 AND status = 'PENDING'"
	if notify {
		update = "WITH done AS (" + update + " RETURNING id) SELECT pg_notify('bench_commit_rate', id) FROM done"
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	b.StartTimer()
	start := time.Now()
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := pool.Exec(ctx, update, "d-"+strconv.Itoa(i), time.Now().UnixMilli()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return drainResult{drain: elapsed}
}
