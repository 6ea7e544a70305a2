package libdbos

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
)

// vector returns a golden frame of the protocol.
func vector(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../protocol/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct{ Name, Hex string }
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Name == name {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no vector %s", name)
	return nil
}

func jsonConfig(t *testing.T, c map[string]any) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func handshake(t *testing.T, l *Library, h uint64) {
	t.Helper()
	if err := l.Send(h, vector(t, "hello_client")); err != nil {
		t.Fatal(err)
	}
	reply, err := l.Recv(h, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(reply, []byte("\xa4kind\x02\xa2id\x01\xa4body")) || bytes.Contains(reply, []byte("error")) {
		t.Fatalf("hello reply %x", reply)
	}
}

// backends counts the server connections to database.
func backends(t *testing.T, admin *pgx.Conn, database string) int {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = $1", database).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLastCloseStopsEngine: handles of one config share an engine; closing
// the last stops every goroutine the engine and the handles started and
// closes the engine's pool.
func TestLastCloseStopsEngine(t *testing.T) {
	dbURL := pgtest.Database(t)
	admin := pgtest.Connect(t, pgtest.URL(t))
	database := dbName(t, dbURL)
	before := goleak.IgnoreCurrent()
	l := New()
	cfg := jsonConfig(t, map[string]any{"database_url": dbURL})
	h1, err := l.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := l.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(l) })
	handshake(t, l, h1)
	handshake(t, l, h2)
	if len(l.engines) != 1 {
		t.Fatalf("%d engines for one config, want 1", len(l.engines))
	}
	var eng *sharedEngine
	for _, e := range l.engines {
		eng = e
	}
	if eng.refs != 2 {
		t.Fatalf("engine refs %d, want 2", eng.refs)
	}
	services := eng.engine.Agent.Goroutines()
	t.Logf("engine goroutines while open: %v; process goroutines: %d", services, runtime.NumGoroutine())
	if len(services) == 0 {
		t.Fatal("the engine reports no goroutines while it runs")
	}
	if n := backends(t, admin, database); n == 0 {
		t.Fatal("the engine holds no database connection while it runs")
	}
	if err := l.Close(h1); err != nil {
		t.Fatal(err)
	}
	if len(l.engines) != 1 || eng.refs != 1 {
		t.Fatal("closing one of two handles stopped the engine")
	}
	if err := l.Send(h2, vector(t, "ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Recv(h2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(h2); err != nil {
		t.Fatal(err)
	}
	if len(l.engines) != 0 {
		t.Fatal("the last close left the engine registered")
	}
	if left := eng.engine.Agent.Goroutines(); len(left) != 0 {
		t.Fatalf("the engine's goroutines still run after the last close: %v", left)
	}
	// goleak retries until the goroutines have exited (or fails naming
	// them): nothing the library, the engine or pgx started is left.
	if err := goleak.Find(before); err != nil {
		t.Fatal(err)
	}
	// The pool closed its connections before Close returned; the server
	// drops a backend from pg_stat_activity as it exits, a moment later.
	deadline := time.Now().Add(10 * time.Second)
	for n := backends(t, admin, database); n != 0; n = backends(t, admin, database) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to the engine's database remain after the last close", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Send(h2, vector(t, "ping")); CodeOf(err) != ErrInvalid {
		t.Fatalf("send on a closed handle: %v", err)
	}
}

func dbName(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestHostThatNeverReads: a host that sends and never calls recv makes the
// library hold at most its inbox and the session's bound, and the session's
// stall timeout ends it; the send that was blocked returns Closed.
func TestHostThatNeverReads(t *testing.T) {
	const maxOutbound = 64 << 10
	const stall = 2 * time.Second
	l := New()
	l.tune = func(c *agent.Config) {
		c.MaxOutboundBytes = maxOutbound
		c.StallTimeout = stall
	}
	h, err := l.Open(jsonConfig(t, map[string]any{"database_url": pgtest.URL(t), "schema": pgtest.Schema(t)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(l) })
	handshake(t, l, h)
	ping := vector(t, "ping")
	// 200,000 pings (5.6 MiB of requests) would be 4 MiB of replies.
	const pings = 200_000
	flood := make([]byte, 0, pings*len(ping))
	for range pings {
		flood = append(flood, ping...)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	err = l.Send(h, flood)
	took := time.Since(start)
	if CodeOf(err) != Closed {
		t.Fatalf("the flood's send returned %v, want Closed once the session stalled", err)
	}
	if took < stall || took > stall+20*time.Second {
		t.Fatalf("the session closed after %s; its stall timeout is %s", took, stall)
	}
	runtime.ReadMemStats(&m1)
	grew := int64(m1.HeapInuse) - int64(m0.HeapInuse)
	// What the library and the session held is delivered, then the end:
	// at most the inbox, the chunk being reassembled and the session's
	// bound of queued bytes.
	held := 0
	for {
		b, err := l.Recv(h, 5*time.Second)
		if err != nil {
			if !errors.Is(err, errClosed) {
				t.Fatalf("after the stall: %v", err)
			}
			break
		}
		held += len(b)
	}
	t.Logf("send blocked %s; then %d bytes (%d replies) were delivered; heap in use grew %d KiB",
		took, held, held/17, grew>>10)
	if bound := (inboxDepth+1)*chunkSize + maxOutbound; held > bound {
		t.Fatalf("the library held %d bytes for a host that never reads, more than its bound of %d", held, bound)
	}
	// Replies of 17 bytes for every ping would be 3.4 MiB.
	if grew > 4<<20 {
		t.Fatalf("the heap grew %d MiB for a host that never reads", grew>>20)
	}
	n := held
	if n == 0 {
		t.Fatal("nothing the session queued reached recv")
	}
}

// closeAll closes what a failed test left open, so its engine does not
// outlive it.
func closeAll(l *Library) {
	l.mu.Lock()
	var hs []uint64
	for h := range l.handles {
		hs = append(hs, h)
	}
	l.mu.Unlock()
	for _, h := range hs {
		_ = l.Close(h)
	}
}

// panicky is a mode whose every call panics, as a bug would.
type panicky struct{ closed chan struct{} }

func (p *panicky) send([]byte) error { panic("a bug in send") }
func (p *panicky) inbox() *inbox     { panic("a bug in recv") }
func (p *panicky) maxFrame() int     { return 1 << 20 }
func (p *panicky) close()            { close(p.closed) }

// TestGuardRecoversPanics: a panic inside a call is DBOS_ERR_INTERNAL with
// its message, the handle is closed, and the library goes on.
func TestGuardRecoversPanics(t *testing.T) {
	l := New()
	p := &panicky{closed: make(chan struct{})}
	const h = 42
	l.handles[h] = p
	err := l.Guard(h, func() error { return l.Send(h, vector(t, "ping")) })
	if CodeOf(err) != ErrInternal || !strings.Contains(err.Error(), "a bug in send") {
		t.Fatalf("a panicking send returned %v", err)
	}
	select {
	case <-p.closed:
	default:
		t.Fatal("the handle of a recovered panic was not closed")
	}
	if _, err := l.lookup(h); CodeOf(err) != ErrInvalid {
		t.Fatalf("the handle is still open after its panic: %v", err)
	}
	if err := l.Guard(0, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
