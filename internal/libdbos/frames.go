package libdbos

import (
	"encoding/binary"
	"sync"
	"time"
)

const (
	// chunkSize is the most the pump takes from a session or socket at once.
	chunkSize = 64 << 10
	// inboxDepth is how many batches of whole frames wait for the host's
	// recv: past it the pump stops taking, so the session's own bounds
	// (MaxOutboundBytes, then StallTimeout) or the socket's back-pressure
	// apply to a host that does not read. With a batch at most
	// max(chunkSize, one frame), a handle holds at most inboxDepth+1
	// batches and one frame being reassembled.
	inboxDepth = 4
	// recvCoalesce is how much one recv returns at most when several
	// batches wait (a single batch may be larger: one frame is never cut).
	recvCoalesce = 1 << 20
	// maxInboundFrame is the largest frame accepted from the agent: what the
	// Go client and the bindings accept.
	maxInboundFrame = 1 << 30
)

// checkFrames checks that b is one or more whole frames, none larger than
// max.
func checkFrames(b []byte, max int) error {
	if len(b) == 0 {
		return errorf(ErrInvalid, "no bytes: send one or more whole frames (a 4-byte big-endian length, then that many bytes)")
	}
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return errorf(ErrInvalid, "a partial frame at byte %d: %d bytes where a 4-byte length prefix is needed", off, len(b)-off)
		}
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n > max {
			return errorf(ErrInvalid, "the frame at byte %d is %d bytes, more than the session's maximum of %d", off, n, max)
		}
		if len(b)-off-4 < n {
			return errorf(ErrInvalid, "a partial frame at byte %d: its prefix says %d bytes, %d follow", off, n, len(b)-off-4)
		}
		off += 4 + n
	}
	return nil
}

// eachFrame calls f with the payload of each frame of b (checked by
// checkFrames), stopping at its first error.
func eachFrame(b []byte, f func([]byte) error) error {
	for off := 0; off < len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if err := f(b[off+4 : off+4+n]); err != nil {
			return err
		}
		off += 4 + n
	}
	return nil
}

// inbox carries whole frames, with their prefixes, from a pump to recv. The
// pump owns the sending side; closing the handle ends both.
type inbox struct {
	batches chan []byte
	// ended is closed by the pump when its source has no more (the
	// session or the socket ended) and every batch is in batches.
	ended chan struct{}
	// stop is closed by close: the pump gives up and recv returns Closed.
	stop     chan struct{}
	stopOnce sync.Once
	// err is why the source ended, when not an ordinary end (read after
	// ended).
	err error
}

func newInbox() *inbox {
	return &inbox{batches: make(chan []byte, inboxDepth), ended: make(chan struct{}), stop: make(chan struct{})}
}

// pump reads chunks from take until it fails, reassembling whole frames
// into batches. A chunk holds whole frames and parts of frames, in order,
// as on a socket. The caller ends its source when pump returns.
func (in *inbox) pump(take func([]byte) (int, error)) {
	defer close(in.ended)
	defer func() {
		// A goroutine's panic would end the host's process: this one ends
		// the handle's frames instead, and recv says why.
		if r := recover(); r != nil {
			in.err = errorf(ErrInternal, "libdbos: the handle's frames failed: %v", r)
		}
	}()
	buf := make([]byte, chunkSize)
	var pending []byte
	for {
		n, err := take(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			whole := 0
			for len(pending)-whole >= 4 {
				size := int(binary.BigEndian.Uint32(pending[whole:]))
				if size > maxInboundFrame {
					in.err = errorf(ErrInternal, "the agent sent a frame of %d bytes, more than %d", size, maxInboundFrame)
					return
				}
				if len(pending)-whole-4 < size {
					break
				}
				whole += 4 + size
			}
			if whole > 0 {
				batch := make([]byte, whole)
				copy(batch, pending[:whole])
				pending = append(pending[:0], pending[whole:]...)
				if cap(pending) > 2*chunkSize && len(pending) < chunkSize {
					// A large frame went out: do not keep its buffer.
					pending = append([]byte(nil), pending...)
				}
				select {
				case in.batches <- batch:
				case <-in.stop:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// recv returns the next whole frames: at once when some wait, else after
// waiting up to timeout (negative: without a bound; 0: not at all).
func (in *inbox) recv(timeout time.Duration) ([]byte, error) {
	select {
	case <-in.stop:
		return nil, errClosed
	default:
	}
	first, ok := in.tryTake()
	switch {
	case ok:
	case timeout == 0:
		select {
		case <-in.ended:
			// The pump put every batch in before it ended.
			if first, ok = in.tryTake(); !ok {
				return nil, in.endErr()
			}
		default:
			return nil, errTimeout
		}
	default:
		var timer <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timer = t.C
		}
		select {
		case first = <-in.batches:
		case <-in.ended:
			if first, ok = in.tryTake(); !ok {
				return nil, in.endErr()
			}
		case <-in.stop:
			return nil, errClosed
		case <-timer:
			return nil, errTimeout
		}
	}
	out := first
	for len(out) < recvCoalesce {
		select {
		case more := <-in.batches:
			out = append(out, more...)
		default:
			return out, nil
		}
	}
	return out, nil
}

func (in *inbox) tryTake() ([]byte, bool) {
	select {
	case b := <-in.batches:
		return b, true
	default:
		return nil, false
	}
}

func (in *inbox) endErr() error {
	if in.err != nil {
		return in.err
	}
	return errClosed
}

// close wakes recv and stops the pump at its next batch.
func (in *inbox) close() { in.stopOnce.Do(func() { close(in.stop) }) }
