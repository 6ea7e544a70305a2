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
)

// DefaultMaxFrameSize caps one frame's body unless the handshake agrees on
// less. Payloads bigger than this belong in the application's own storage.
const DefaultMaxFrameSize = 16 << 20

// frameHeaderSize is the big-endian uint32 body length in front of each
// frame.
const frameHeaderSize = 4

// ErrFrameTooLarge is returned for a frame whose announced length passes the
// cap. The reader cannot resynchronise after it: the connection must close.
var ErrFrameTooLarge = errors.New("frame larger than the agreed maximum")

// FrameReader reads frames from a stream, reusing one buffer.
type FrameReader struct {
	r   io.Reader
	max int
	buf []byte
	hdr [frameHeaderSize]byte
}

// NewFrameReader reads frames of at most maxSize bytes from r.
func NewFrameReader(r io.Reader, maxSize int) *FrameReader {
	if maxSize <= 0 {
		maxSize = DefaultMaxFrameSize
	}
	return &FrameReader{r: r, max: maxSize}
}

// SetMaxSize changes the cap, as the handshake agrees.
func (fr *FrameReader) SetMaxSize(n int) { fr.max = n }

// Next returns the next frame body. The slice is valid until the next call.
// io.EOF means the stream ended cleanly between frames;
// io.ErrUnexpectedEOF that it ended inside one.
func (fr *FrameReader) Next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if uint64(n) > uint64(fr.max) {
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, fr.max)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	body := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	// Don't keep a huge buffer alive for the rest of a connection because
	// of one large frame.
	if cap(fr.buf) > 1<<20 && n < 1<<16 {
		fr.buf = nil
	}
	return body, nil
}

// AppendFrame appends body with its length prefix to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
