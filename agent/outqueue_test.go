package agent

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestByteQueueKeepsOrderAcrossBlocksAndHoldsNoneEmpty(t *testing.T) {
	var q byteQueue
	var want, got bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 5000)
	for round := range 200 {
		// Pieces up to twice a block, read in smaller and larger bites.
		piece := make([]byte, r.IntN(2*outChunkSize))
		for i := range piece {
			piece[i] = byte(round + i)
		}
		q.write(piece)
		want.Write(piece)
		require.Equal(t, want.Len()-got.Len(), q.len())
		for range r.IntN(40) {
			n := q.read(buf[:r.IntN(len(buf))+1])
			got.Write(buf[:n])
		}
		require.LessOrEqual(t, len(q.blocks), q.len()/outChunkSize+2, "blocks hold what is queued")
	}
	for q.len() > 0 {
		n := q.read(buf)
		got.Write(buf[:n])
	}
	require.Equal(t, want.Bytes(), got.Bytes())
	require.Nil(t, q.blocks, "an empty queue holds no block")
	require.Zero(t, q.read(buf))
}
