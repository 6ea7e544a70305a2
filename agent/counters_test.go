package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHistogramBucketsAreCumulativeAndUpperBoundsInclusive(t *testing.T) {
	h := newHistogram([]float64{1, 4, 16})
	for _, v := range []float64{0.5, 1, 2, 4, 5, 100} {
		h.observe(v)
	}
	s := h.snapshot()
	require.Equal(t, uint64(6), s.Count)
	require.InDelta(t, 112.5, s.Sum, 1e-9)
	// An observation equal to a bound is in that bound's bucket, as
	// Prometheus's le ("less or equal") says; 100 is only in +Inf (Count).
	require.Equal(t, map[float64]uint64{1: 2, 4: 4, 16: 5}, s.Buckets)
}
