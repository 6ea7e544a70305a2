package main

import (
	"fmt"
	"math"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/server"
)

// byteSize is a size given as a number of bytes or with a unit ("16MiB",
// "512KiB", "1GB"); humanize reads the units, SI and IEC alike.
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return humanize.IBytes(uint64(*b))
}

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return err
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) Type() string { return "size" }

// UnmarshalYAML takes an integer or a string with a unit.
func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	if err := b.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// connectionLimits are serve's bounds on what clients may make the agent
// hold; see agent.Config and server.Config for what each means. A zero
// field takes the config file's value, then the default.
type connectionLimits struct {
	MaxConnections       int      `yaml:"max_connections"`
	MaxConnectionsPerUID int      `yaml:"max_connections_per_uid"`
	MaxInFlight          int      `yaml:"max_in_flight"`
	MaxRunning           int      `yaml:"max_running"`
	MaxOutbound          byteSize `yaml:"max_outbound_bytes"`
	MaxFrameSize         byteSize `yaml:"max_frame_size"`
	StallTimeoutSec      float64  `yaml:"stall_timeout_sec"`
	stallTimeout         time.Duration
}

// limitsConfigKeys are the YAML keys of connectionLimits, for the help text.
const limitsConfigKeys = "max_connections, max_connections_per_uid, max_in_flight, max_running, max_outbound_bytes, max_frame_size, stall_timeout_sec"

// Ranges the limits must be in. A frame must hold a hello with its
// registrations; frames larger than a GiB are not what a Unix socket
// between two processes of one host is for (and the Go client reads at most
// that).
const (
	minFrameSize = 64 << 10
	maxFrameSize = 1 << 30
	minOutbound  = 64 << 10
	maxInFlight  = 1 << 16
)

func (l *connectionLimits) register(f *pflag.FlagSet) {
	f.IntVar(&l.MaxConnections, "max-connections", 0,
		fmt.Sprintf("most connections served at once; more are refused with resource_exhausted (default %d)", server.DefaultMaxConnections))
	f.IntVar(&l.MaxConnectionsPerUID, "max-connections-per-uid", 0,
		"most connections of one user (of allowed_uids) at once (default: --max-connections)")
	f.IntVar(&l.MaxInFlight, "max-in-flight", 0,
		fmt.Sprintf("most requests of one connection handled at once; past it the agent stops reading that connection until one is answered, and waits (get_result, recv, ...) count (default %d)", agent.DefaultMaxInFlight))
	f.IntVar(&l.MaxRunning, "max-running", 0,
		fmt.Sprintf("most requests other than waits of one connection handled at once: each holds its reply until the connection takes it (default %d)", agent.DefaultMaxRunning))
	f.Var(&l.MaxOutbound, "max-outbound",
		fmt.Sprintf("most bytes queued for one connection that does not read them: past it replies wait, pushes (run, cancel) past twice that (default %s)", humanize.IBytes(agent.DefaultMaxOutboundBytes)))
	f.Var(&l.MaxFrameSize, "max-frame-size",
		fmt.Sprintf("largest frame a client may send, announced in the handshake (default %s)", humanize.IBytes(protocol.DefaultMaxFrameSize)))
	f.DurationVar(&l.stallTimeout, "stall-timeout", 0,
		fmt.Sprintf("how long a connection may read nothing of what it is sent, or take to finish a frame it began, before it is closed (a worker's runs then go back to their queues) (default %s)", agent.DefaultStallTimeout))
}

// resolve fills what the flags left zero from the config file, and checks
// the ranges.
func (l *connectionLimits) resolve(file connectionLimits) error {
	pick := func(flag, fromFile int) int {
		if flag != 0 {
			return flag
		}
		return fromFile
	}
	l.MaxConnections = pick(l.MaxConnections, file.MaxConnections)
	l.MaxConnectionsPerUID = pick(l.MaxConnectionsPerUID, file.MaxConnectionsPerUID)
	l.MaxInFlight = pick(l.MaxInFlight, file.MaxInFlight)
	l.MaxRunning = pick(l.MaxRunning, file.MaxRunning)
	l.MaxOutbound = byteSize(pick(int(l.MaxOutbound), int(file.MaxOutbound)))
	l.MaxFrameSize = byteSize(pick(int(l.MaxFrameSize), int(file.MaxFrameSize)))
	if l.stallTimeout == 0 && file.StallTimeoutSec != 0 {
		if math.IsNaN(file.StallTimeoutSec) || math.IsInf(file.StallTimeoutSec, 0) || file.StallTimeoutSec < 0 {
			return fmt.Errorf("stall_timeout_sec must be a positive number of seconds, not %v", file.StallTimeoutSec)
		}
		l.stallTimeout = time.Duration(file.StallTimeoutSec * float64(time.Second))
	}
	switch {
	case l.MaxConnections < 0:
		return fmt.Errorf("max connections must be positive, not %d", l.MaxConnections)
	case l.MaxConnectionsPerUID < 0:
		return fmt.Errorf("max connections per uid must be positive, not %d", l.MaxConnectionsPerUID)
	case l.MaxInFlight < 0 || l.MaxInFlight > maxInFlight:
		return fmt.Errorf("max in flight must be from 1 to %d, not %d", maxInFlight, l.MaxInFlight)
	case l.MaxRunning < 0 || l.MaxRunning > maxInFlight:
		return fmt.Errorf("max running must be from 1 to %d, not %d", maxInFlight, l.MaxRunning)
	case l.MaxOutbound != 0 && l.MaxOutbound < minOutbound:
		return fmt.Errorf("max outbound must be at least %s, not %s", humanize.IBytes(minOutbound), l.MaxOutbound.String())
	case l.MaxFrameSize != 0 && (l.MaxFrameSize < minFrameSize || l.MaxFrameSize > maxFrameSize):
		return fmt.Errorf("max frame size must be from %s to %s, not %s",
			humanize.IBytes(minFrameSize), humanize.IBytes(maxFrameSize), l.MaxFrameSize.String())
	case l.stallTimeout < 0:
		return fmt.Errorf("stall timeout must be positive, not %s", l.stallTimeout)
	}
	return nil
}
