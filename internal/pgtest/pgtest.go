// Package pgtest gives tests a real PostgreSQL to work against: the server
// named by DBOS_TEST_DATABASE_URL (or the local one `make test` prepares), a
// test database created on first use, and a fresh schema name per test that
// is dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server `make test` prepares (scripts/ensure-postgres.sh).
const DefaultURL = "postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable"

var (
	createOnce sync.Once
	createErr  error
)

// URL returns the test database URL, creating the database on first use.
func URL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv("DBOS_TEST_DATABASE_URL")
	if raw == "" {
		raw = DefaultURL
	}
	createOnce.Do(func() { createErr = ensureDatabase(raw) })
	if createErr != nil {
		t.Fatalf("test database unavailable (run scripts/ensure-postgres.sh or set DBOS_TEST_DATABASE_URL): %v", createErr)
	}
	return raw
}

// WithDatabase returns rawURL naming another database on the same server.
func WithDatabase(t testing.TB, rawURL, database string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse database url: %v", err)
	}
	u.Path = "/" + database
	return u.String()
}

// UniqueName returns prefix followed by random hex, usable as a schema or
// database name.
func UniqueName(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// Schema returns a schema name nobody uses yet and drops that schema (if a
// test created it) when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	databaseURL := URL(t)
	name := UniqueName("t_")
	t.Cleanup(func() { DropSchema(t, databaseURL, name) })
	return name
}

// Database creates an empty database of its own for a test (for what is
// database-wide, such as NOTIFY channels) and drops it when the test ends.
// It returns the database's URL.
func Database(t testing.TB) string {
	t.Helper()
	base := URL(t)
	name := UniqueName("db_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return WithDatabase(t, base, name)
}

// DropSchema drops schema and everything in it.
func DropSchema(t testing.TB, databaseURL, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// Connect opens a plain connection to databaseURL, closed when the test ends.
func Connect(t testing.TB, databaseURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func ensureDatabase(rawURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("parse %s: %w", "DBOS_TEST_DATABASE_URL", err)
	}
	name := cfg.Database
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS(SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil // another test binary created it first
	}
	return err
}
