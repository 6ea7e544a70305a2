// Package sidecar is what the library's sidecar mode and its child, the
// hidden `dbos-agent plugin`, agree on: the hashicorp/go-plugin handshake
// and the small RPC service of the child's lifecycle. Frames do not go over
// it: the child serves them on its own Unix socket, as `serve` does, and the
// library connects there.
package sidecar

import (
	"fmt"
	"net/rpc"

	"github.com/hashicorp/go-plugin"
)

// AppProtocolVersion is go-plugin's application protocol version: the
// lifecycle RPC below. The frames' protocol versions are checked apart,
// from Info.
const AppProtocolVersion = 1

// Handshake is the go-plugin handshake of the library and its child: the
// cookie only tells a child started by the library from one run by hand.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  AppProtocolVersion,
	MagicCookieKey:   "DBOS_AGENT_PLUGIN",
	MagicCookieValue: "libdbos-sidecar-f3b1c27e",
}

// PluginName is the one plugin the child serves.
const PluginName = "agent"

// Info is what the child says of itself once started (or reattached to).
type Info struct {
	AgentVersion string
	// ProtocolMin and ProtocolMax are the frame protocol versions its
	// socket speaks.
	ProtocolMin, ProtocolMax uint32
	// Socket is where it serves frames.
	Socket string
	PID    int
	// Key names the engine settings it runs (database, schema, executor).
	Key string
}

// Agent is the child's lifecycle service.
type Agent interface {
	Info() (Info, error)
	// Heartbeat says a host still uses the child: one that hears none for
	// its orphan grace period exits.
	Heartbeat() error
}

// Plugins is the plugin set of both sides; impl is nil on the host's.
func Plugins(impl Agent) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{PluginName: &agentPlugin{impl: impl}}
}

// agentPlugin carries Agent over go-plugin's net/rpc.
type agentPlugin struct{ impl Agent }

func (p *agentPlugin) Server(*plugin.MuxBroker) (any, error) {
	if p.impl == nil {
		return nil, fmt.Errorf("the host serves no plugin")
	}
	return &rpcServer{impl: p.impl}, nil
}

func (p *agentPlugin) Client(_ *plugin.MuxBroker, c *rpc.Client) (any, error) {
	return &rpcClient{c: c}, nil
}

type rpcServer struct{ impl Agent }

func (s *rpcServer) Info(_ struct{}, out *Info) error {
	info, err := s.impl.Info()
	*out = info
	return err
}

func (s *rpcServer) Heartbeat(_ struct{}, _ *struct{}) error { return s.impl.Heartbeat() }

type rpcClient struct{ c *rpc.Client }

func (c *rpcClient) Info() (Info, error) {
	var out Info
	err := c.c.Call("Plugin.Info", struct{}{}, &out)
	return out, err
}

func (c *rpcClient) Heartbeat() error { return c.c.Call("Plugin.Heartbeat", struct{}{}, &struct{}{}) }

// EnvKey carries Info.Key to the child.
const EnvKey = "DBOS_AGENT_PLUGIN_KEY"
