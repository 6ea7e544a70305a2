package sysdb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The closing marker is told from values, in both forms DBOS SDKs write it;
// a workflow's own string that happens to read the same in another
// serialization is a value.
func TestStreamClosed(t *testing.T) {
	portable, pickle := "portable_json", "py_pickle"
	for _, c := range []struct {
		entry  StreamEntry
		closed bool
	}{
		{StreamEntry{Value: StreamClosedValue, Serialization: &portable}, true},
		{StreamEntry{Value: "__DBOS_STREAM_CLOSED__"}, true},
		{StreamEntry{Value: StreamClosedValue, Serialization: &pickle}, false},
		{StreamEntry{Value: `"a"`, Serialization: &portable}, false},
	} {
		require.Equal(t, c.closed, c.entry.Closed(), "%+v", c.entry)
	}
}
