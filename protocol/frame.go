// Package protocol is the wire format between the agent and the language
// bindings: length-prefixed msgpack frames, the handshake, every message and
// the error catalog. PROTOCOL.md in this folder is its specification for
// people writing a binding; this package is the Go implementation of it.
//
// The package imports nothing of the project, so a Go client can use it
// without the agent.
package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// DefaultMaxFrameSize caps one frame's body unless the handshake agrees on
// less. Payloads bigger than this belong in the application's own storage.
const DefaultMaxFrameSize = 16 << 20

// frameHeaderSize is the big-endian uint32 body length in front of each
// frame.
const frameHeaderSize = 4

const (
	// maxRetainedBuffer is the largest buffer a FrameReader keeps between
	// frames: one large frame must not pin its memory for the rest of a
	// connection.
	maxRetainedBuffer = 1 << 20
	// firstChunk is what a FrameReader allocates for a frame before its
	// bytes arrive; past it the buffer grows as they do, so that a peer
	// announcing a large frame and sending nothing costs little.
	firstChunk = 64 << 10
)

// ErrFrameTooLarge is returned for a frame whose announced length passes the
// cap. The reader cannot resynchronise after it: the connection must close.
var ErrFrameTooLarge = errors.New("frame larger than the agreed maximum")

// FrameReader reads frames from a stream, reusing one buffer.
type FrameReader struct {
	r     io.Reader
	max   int
	buf   []byte
	hdr   [frameHeaderSize]byte
	chunk int // firstChunk; tests lower it to exercise growth
}

// NewFrameReader reads frames of at most maxSize bytes from r (the default
// when maxSize <= 0).
func NewFrameReader(r io.Reader, maxSize int) *FrameReader {
	fr := &FrameReader{r: r, chunk: firstChunk}
	fr.SetMaxSize(maxSize)
	return fr
}

// SetMaxSize changes the cap, as the handshake agrees (the default when
// n <= 0).
func (fr *FrameReader) SetMaxSize(n int) {
	if n <= 0 {
		n = DefaultMaxFrameSize
	}
	fr.max = n
}

// Next returns the next frame body. The slice is valid until the next call.
// io.EOF means the stream ended cleanly between frames;
// io.ErrUnexpectedEOF that it ended inside one. Other errors of the
// underlying reader are returned as they are.
func (fr *FrameReader) Next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if uint64(n) > uint64(fr.max) {
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, fr.max)
	}
	body, err := fr.readBody(int(n))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

func (fr *FrameReader) readBody(n int) ([]byte, error) {
	if n <= cap(fr.buf) {
		body := fr.buf[:n]
		if _, err := io.ReadFull(fr.r, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	// Grow as the bytes arrive rather than trusting the announced length:
	// at most twice what the peer really sent is ever allocated.
	buf := fr.buf[:0]
	for len(buf) < n {
		want := min(n-len(buf), max(len(buf), fr.chunk))
		buf = slices.Grow(buf, want)
		k, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, err
		}
	}
	// The caller holds the returned slice until the next call; the reader
	// keeps the buffer for reuse only if it is small.
	if cap(buf) <= maxRetainedBuffer {
		fr.buf = buf
	} else {
		fr.buf = nil
	}
	return buf, nil
}

// AppendFrame appends body with its length prefix to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
