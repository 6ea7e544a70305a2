package libdbos

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

func frame(n int, fill byte) []byte {
	f := make([]byte, 4+n)
	binary.BigEndian.PutUint32(f, uint32(n))
	for i := 4; i < len(f); i++ {
		f[i] = fill
	}
	return f
}

// TestPumpReassembles: chunks cut anywhere, as TakeOutbound and a socket
// cut them (a frame larger than a chunk in parts), come out of recv as the
// same bytes in whole frames.
func TestPumpReassembles(t *testing.T) {
	var stream []byte
	for i, n := range []int{0, 17, 3 * chunkSize, 1, chunkSize - 4, chunkSize, 200} {
		stream = append(stream, frame(n, byte(i))...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	src := bytes.NewReader(stream)
	in := newInbox()
	go in.pump(func(buf []byte) (int, error) {
		return src.Read(buf[:1+rng.IntN(len(buf))])
	})
	var got []byte
	for {
		b, err := in.recv(5 * time.Second)
		if err != nil {
			if !errors.Is(err, errClosed) {
				t.Fatal(err)
			}
			break
		}
		if checkFrames(b, maxInboundFrame) != nil {
			t.Fatalf("recv returned a partial frame (%d bytes)", len(b))
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, stream) {
		t.Fatalf("recv returned %d bytes, want the %d sent", len(got), len(stream))
	}
}

func TestRecvTimeoutAndClose(t *testing.T) {
	in := newInbox()
	go in.pump(func([]byte) (int, error) { <-in.stop; return 0, io.EOF })
	if _, err := in.recv(0); !errors.Is(err, errTimeout) {
		t.Fatalf("poll: %v", err)
	}
	start := time.Now()
	if _, err := in.recv(50 * time.Millisecond); !errors.Is(err, errTimeout) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("recv(50ms): %v after %s", err, time.Since(start))
	}
	done := make(chan error)
	go func() {
		_, err := in.recv(-1)
		done <- err
	}()
	in.close()
	if err := <-done; !errors.Is(err, errClosed) {
		t.Fatalf("a recv woken by close: %v", err)
	}
	<-in.ended
}

func TestCheckFrames(t *testing.T) {
	ok := append(frame(3, 1), frame(0, 0)...)
	if err := checkFrames(ok, 16); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":      nil,
		"short head": {0, 0},
		"short body": frame(10, 1)[:8],
		"too large":  frame(17, 1),
		"then part":  append(frame(1, 1), 0, 0, 0),
	} {
		if err := checkFrames(b, 16); CodeOf(err) != ErrInvalid || err.Error() == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseConfig(t *testing.T) {
	good := map[string]string{
		`{"database_url": "postgres://x"}`:                                          ModeEmbedded,
		` {"mode": "sidecar", "database_url": "postgres://x", "runtime_dir": "/r"}`: ModeSidecar,
		`{"mode": "connect", "socket": "/s", "trusted_uids": [7]}`:                  ModeConnect,
		"\x82\xa4mode\xa7connect\xa6socket\xa2/s":                                   ModeConnect,
	}
	for raw, mode := range good {
		c, err := ParseConfig([]byte(raw))
		if err != nil || c.Mode != mode {
			t.Errorf("%q: %+v %v", raw, c, err)
		}
	}
	for _, raw := range []string{
		``, `{`, `{"mode": "nope"}`, `{"database_url": "postgres://x", "bogus": 1}`,
		`{"mode": "connect", "database_url": "postgres://x"}`, `{"database_url": "p", "socket": "/s"}`,
		`{"database_url": "p", "log_level": "loud"}`, "\x81\xa5bogus\x01", `{"database_url": "p"} {}`,
	} {
		if _, err := ParseConfig([]byte(raw)); CodeOf(err) != ErrInvalid {
			t.Errorf("%q: %v, want ErrInvalid", raw, err)
		}
	}
	// No database_url: the embedded and sidecar engines use the default
	// SQLite file `dbos-agent serve` would.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	path, err := sysdb.DefaultSQLitePath()
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`{"mode": "embedded"}`, `{}`, `{"mode": "sidecar"}`} {
		c, err := ParseConfig([]byte(raw))
		if err != nil || c.DatabaseURL != sysdb.SQLiteURL(path) {
			t.Errorf("%q: %+v %v, want the default SQLite file %s", raw, c, err, path)
		}
	}
}
