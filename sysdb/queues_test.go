package sysdb_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// TestLastFiredAtFormat: what we write is Python's isoformat() of an aware
// datetime in the tick's zone (the one form Python 3.10's fromisoformat and Go's RFC 3339
// parser both take), and we read every form the SDKs write.
func TestLastFiredAtFormat(t *testing.T) {
	t.Parallel()
	berlin := time.FixedZone("CET", 3600)
	for _, c := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "2025-01-02T03:04:05+00:00"},
		// In the tick's own zone, as DBOS Python writes a tick of a schedule in that zone.
		{time.Date(2025, 1, 2, 4, 4, 5, 0, berlin), "2025-01-02T04:04:05+01:00"},
		{time.Date(2025, 1, 2, 3, 4, 5, 120_000_000, time.UTC), "2025-01-02T03:04:05.120000+00:00"},
		// Python has microseconds: finer is truncated, as datetime would.
		{time.Date(2025, 1, 2, 3, 4, 5, 123_456_789, time.UTC), "2025-01-02T03:04:05.123456+00:00"},
		{time.Date(2025, 1, 2, 3, 4, 5, 999, time.UTC), "2025-01-02T03:04:05+00:00"},
	} {
		got := sysdb.FormatLastFiredAt(c.in)
		require.Equal(t, c.want, got)
		back, ok := sysdb.ParseLastFiredAt(got)
		require.True(t, ok, got)
		require.True(t, c.in.Truncate(time.Microsecond).Equal(back), "%s read back as %v", got, back)
		_, err := time.Parse(time.RFC3339Nano, got)
		require.NoError(t, err, "the Go SDK reads last_fired_at with RFC3339Nano")
	}

	want := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, text := range []string{
		"2025-01-02T03:04:05Z",                // Go SDK, UTC
		"2025-01-02T04:04:05+01:00",           // Go SDK, a local zone
		"2025-01-02T03:04:05.000000000Z",      // Go SDK RFC3339Nano keeps no zeros, but be lenient
		"2025-01-02T03:04:05+00:00",           // Python isoformat, UTC
		"2025-01-01T22:04:05-05:00",           // Python isoformat in the cron's zone
		"2025-01-02 03:04:05+00:00",           // str(datetime)
		"2025-01-02T03:04:05",                 // naive: taken as UTC
		"  2025-01-02T03:04:05.000+00:00\n  ", // stray whitespace
	} {
		got, ok := sysdb.ParseLastFiredAt(text)
		require.True(t, ok, text)
		require.True(t, want.Equal(got), "%q read as %v", text, got)
	}
	got, ok := sysdb.ParseLastFiredAt("2025-01-02T03:04:05.123456789Z")
	require.True(t, ok)
	require.Equal(t, 123_456_789, got.Nanosecond())
	for _, bad := range []string{"", "yesterday", "2025-13-01T00:00:00Z", "1735787045"} {
		_, ok := sysdb.ParseLastFiredAt(bad)
		require.False(t, ok, bad)
	}
}
