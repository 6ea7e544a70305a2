package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestLimitsFromFlagsAndConfigFile(t *testing.T) {
	var fc fileConfig
	require.NoError(t, yaml.Unmarshal([]byte(`
max_connections: 64
max_in_flight: 32
max_outbound_bytes: 8MiB
max_frame_size: 1048576
stall_timeout_sec: 2.5
`), &fc))

	var l connectionLimits
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	l.register(f)
	require.NoError(t, f.Parse([]string{"--max-in-flight", "16", "--max-frame-size", "512KiB"}))
	require.NoError(t, l.resolve(fc.Limits))

	require.Equal(t, 64, l.MaxConnections)       // the file's
	require.Equal(t, 16, l.MaxInFlight)          // the flag wins
	require.Equal(t, 0, l.MaxRunning)            // neither: the agent's default
	require.EqualValues(t, 8<<20, l.MaxOutbound) // units
	require.EqualValues(t, 512<<10, l.MaxFrameSize)
	require.Equal(t, 2500*time.Millisecond, l.stallTimeout)
}

func TestLimitsOutOfRangeAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--max-connections", "-1"},
		{"--max-in-flight", "100000"},
		{"--max-running", "-3"},
		{"--max-outbound", "1KiB"},
		{"--max-frame-size", "1KiB"},
		{"--max-frame-size", "2GiB"},
		{"--stall-timeout", "-1s"},
	} {
		var l connectionLimits
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		l.register(f)
		require.NoError(t, f.Parse(args), args)
		require.Error(t, l.resolve(connectionLimits{}), args)
	}
	var l connectionLimits
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	l.register(f)
	require.Error(t, f.Parse([]string{"--max-outbound", "lots"}))

	var fc fileConfig
	require.Error(t, yaml.Unmarshal([]byte("max_frame_size: huge\n"), &fc))
	require.NoError(t, yaml.Unmarshal([]byte("stall_timeout_sec: -4\n"), &fc))
	require.Error(t, (&connectionLimits{}).resolve(fc.Limits))
}
