package agent

import "sync"

// outChunkSize is the block a session's outbound queue grows by. Blocks come
// from a pool shared by all sessions and go back to it as they are written,
// so a queue holds no more than what waits in it (rounded up to a block),
// and an idle session holds none.
const outChunkSize = 64 << 10

var outChunks = sync.Pool{New: func() any {
	b := make([]byte, 0, outChunkSize)
	return &b
}}

// byteQueue is a FIFO of bytes in pooled blocks. Not safe for concurrent
// use: the session's outMu guards it.
type byteQueue struct {
	blocks []*[]byte
	head   int // read offset in blocks[0]
	n      int // bytes queued
}

func (q *byteQueue) len() int { return q.n }

func (q *byteQueue) write(p []byte) {
	q.n += len(p)
	for len(p) > 0 {
		if len(q.blocks) == 0 || len(*q.blocks[len(q.blocks)-1]) == outChunkSize {
			q.blocks = append(q.blocks, outChunks.Get().(*[]byte))
		}
		last := q.blocks[len(q.blocks)-1]
		k := min(len(p), outChunkSize-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
}

// read moves up to len(buf) bytes from the queue into buf.
func (q *byteQueue) read(buf []byte) int {
	n := 0
	for n < len(buf) && len(q.blocks) > 0 {
		b := q.blocks[0]
		k := copy(buf[n:], (*b)[q.head:])
		n += k
		q.head += k
		if q.head == len(*b) {
			// Written out (or all there is): the block goes back to the
			// pool, even the last one, which an idle session would
			// otherwise keep.
			*b = (*b)[:0]
			outChunks.Put(b)
			q.blocks[0] = nil
			q.blocks = q.blocks[1:]
			q.head = 0
		}
	}
	if len(q.blocks) == 0 {
		q.blocks = nil
	}
	q.n -= n
	return n
}
