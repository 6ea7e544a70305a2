package libdbos

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/internal/hosting"
	"github.com/dbos-agent/dbos-agent/internal/sidecar"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/server"
)

// defaultOrphanGrace is how long a child outlives its host's last
// heartbeat (`dbos-agent plugin --orphan-grace`; config orphan_grace_sec):
// a host that crashed leaves its child running that long for its successor
// to reattach. A host sends a heartbeat every sixth of it.
const defaultOrphanGrace = 30 * time.Second

func orphanGrace(cfg Config) time.Duration {
	if cfg.OrphanGraceSec > 0 {
		return max(time.Duration(cfg.OrphanGraceSec*float64(time.Second)), 100*time.Millisecond)
	}
	return defaultOrphanGrace
}

// LibraryDir is the directory of libdbos.so, where sidecar mode looks for
// dbos-agent first (set by the cgo package at load; empty in Go tests).
var LibraryDir string

// sidecarChild is a running `dbos-agent plugin` and the go-plugin client
// that started it or reattached to it.
type sidecarChild struct {
	client *plugin.Client
	agent  sidecar.Agent
	info   sidecar.Info
	record string
	log    *zap.Logger
	// reattached says the child was started by a previous host.
	reattached bool
	stopBeat   chan struct{}
	beatDone   chan struct{}
}

// reattachRecord is what a host keeps in runtime_dir so that the next host
// of the same settings reattaches to its child (go-plugin's ReattachConfig,
// and what the child said of itself).
type reattachRecord struct {
	Key             string `json:"key"`
	PID             int    `json:"pid"`
	Protocol        string `json:"protocol"`
	ProtocolVersion int    `json:"protocol_version"`
	Network         string `json:"network"`
	Addr            string `json:"addr"`
	Socket          string `json:"socket"`
}

func (l *Library) openSidecar(cfg Config) (conn, error) {
	e, err := l.acquireEngine(cfg, func(e *sharedEngine) error {
		child, err := startSidecar(cfg, e.log)
		if err != nil {
			return err
		}
		e.child = child
		return nil
	})
	if err != nil {
		return nil, err
	}
	c, err := dialAgent(e.child.info.Socket, nil, func() { l.releaseEngine(e) })
	if err != nil {
		l.releaseEngine(e)
		return nil, err
	}
	return c, nil
}

// sidecarKey names the engine settings a child runs, in file names and in
// the handshake.
func sidecarKey(cfg Config) string {
	sum := sha256.Sum256([]byte(cfg.DatabaseURL + "\x00" + schemaOf(cfg) + "\x00" + executorOf(cfg)))
	return hex.EncodeToString(sum[:8])
}

func schemaOf(cfg Config) string {
	if cfg.Schema == "" {
		return "dbos"
	}
	return cfg.Schema
}

func executorOf(cfg Config) string {
	if cfg.ExecutorID == "" {
		return hosting.DefaultExecutorID
	}
	return cfg.ExecutorID
}

// runtimeDir is where a child's sockets and reattach record live: private
// to the user (server.PrepareSocketPath checks, and makes it 0700).
func runtimeDir(cfg Config) string {
	if cfg.RuntimeDir != "" {
		return cfg.RuntimeDir
	}
	return filepath.Join(filepath.Dir(hosting.DefaultSocketPath()), "dbos-agent-sidecar")
}

// startSidecar reattaches to the child a previous host of these settings
// left running, or starts one. A lock on the record keeps two hosts
// starting at once from starting two children.
func startSidecar(cfg Config, log *zap.Logger) (*sidecarChild, error) {
	dir := runtimeDir(cfg)
	key := sidecarKey(cfg)
	if _, err := server.PrepareSocketPath(filepath.Join(dir, "probe.sock")); err != nil {
		return nil, errorf(ErrUnavailable, "sidecar runtime_dir %s: %v", dir, err)
	}
	record := filepath.Join(dir, "sidecar-"+key+".json")
	unlock, err := lockFile(record + ".lock")
	if err != nil {
		return nil, errorf(ErrUnavailable, "sidecar: lock %s: %v", record, err)
	}
	defer unlock()
	level := cfg.LogLevel
	if level == "" {
		level = defaultLogLevel
	}
	hlog := hclog.New(&hclog.LoggerOptions{
		Name: "libdbos.sidecar", Output: os.Stderr, Level: hclog.LevelFromString(level), JSONFormat: true,
	})
	child, err := reattach(record, key, hlog)
	switch {
	case err == nil:
		log.Info("reattached to the sidecar a previous host started",
			zap.Int("pid", child.info.PID), zap.String("socket", child.info.Socket))
	case errors.Is(err, fs.ErrNotExist):
		child, err = launch(cfg, dir, key, record, hlog, level)
		if err != nil {
			return nil, err
		}
	default:
		log.Warn("could not reattach to the sidecar of a previous host; starting another", zap.Error(err))
		_ = os.Remove(record)
		child, err = launch(cfg, dir, key, record, hlog, level)
		if err != nil {
			return nil, err
		}
	}
	child.log = log
	child.record = record
	child.stopBeat = make(chan struct{})
	child.beatDone = make(chan struct{})
	go child.heartbeats(orphanGrace(cfg) / 6)
	return child, nil
}

// lockFile takes an exclusive flock on path (created 0600).
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// findAgent is the dbos-agent binary of sidecar mode: agent_path, else
// beside the library, else on PATH.
func findAgent(cfg Config) (string, error) {
	if cfg.AgentPath != "" {
		return cfg.AgentPath, nil
	}
	if LibraryDir != "" {
		p := filepath.Join(LibraryDir, "dbos-agent")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("dbos-agent")
	if err != nil {
		return "", errorf(ErrUnavailable, "sidecar: no dbos-agent beside the library or on PATH: set agent_path")
	}
	return p, nil
}

// childEnv is the host's environment without what would override the
// settings given on the child's command line, with the database URL (kept
// off the command line, which other users can read).
func childEnv(cfg Config, key string, dir string) []string {
	drop := []string{"DBOS_SYSTEM_DATABASE_URL=", "DBOS_SYSTEM_DATABASE_SCHEMA=", "DBOS__VMID=", "DBOS__APPVERSION=",
		"DBOS_AGENT_SOCKET=", "DBOS_AGENT_LOG_LEVEL=", "PLUGIN_", sidecar.EnvKey + "=", sidecar.Handshake.MagicCookieKey + "="}
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env, "DBOS_SYSTEM_DATABASE_URL="+cfg.DatabaseURL, sidecar.EnvKey+"="+key,
		plugin.EnvUnixSocketDir+"="+dir)
}

func launch(cfg Config, dir, key, record string, hlog hclog.Logger, level string) (*sidecarChild, error) {
	agentPath, err := findAgent(cfg)
	if err != nil {
		return nil, err
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	socket := filepath.Join(dir, "sc-"+key[:8]+"-"+hex.EncodeToString(suffix[:])+".sock")
	args := []string{"plugin", "--socket", socket, "--schema", schemaOf(cfg), "--executor-id", executorOf(cfg),
		"--log-level", level, "--orphan-grace", orphanGrace(cfg).String()}
	if cfg.ApplicationVersion != "" {
		args = append(args, "--app-version", cfg.ApplicationVersion)
	}
	cmd := exec.Command(agentPath, args...)
	cmd.Env = childEnv(cfg, key, dir)
	// Its own process group: a Ctrl-C at the host's terminal is the host's
	// to handle (it closes its handles, which stops the child), not the
	// child's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sidecar.Handshake,
		Plugins:          sidecar.Plugins(nil),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolNetRPC},
		// The child's log lines (zap JSON, as serve's) go to the host's
		// stderr as they are; go-plugin's own messages through hlog.
		Stderr:       os.Stderr,
		Logger:       hlog,
		StartTimeout: startTimeout,
	})
	child, err := handshakeChild(client, key)
	if err != nil {
		client.Kill()
		return nil, errorf(ErrUnavailable, "the sidecar %s could not start: %v", agentPath, err)
	}
	rc := client.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		client.Kill()
		return nil, errorf(ErrUnavailable, "the sidecar %s gave no address to reattach to", agentPath)
	}
	rec := reattachRecord{Key: key, PID: rc.Pid, Protocol: string(rc.Protocol), ProtocolVersion: sidecar.AppProtocolVersion,
		Network: rc.Addr.Network(), Addr: rc.Addr.String(), Socket: child.info.Socket}
	if err := writeRecord(record, rec); err != nil {
		client.Kill()
		return nil, errorf(ErrUnavailable, "sidecar: write the reattach record %s: %v", record, err)
	}
	return child, nil
}

func writeRecord(path string, rec reattachRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// reattach connects to the child of record, if it still runs; an error
// wrapping fs.ErrNotExist says there is none to reattach to.
func reattach(record, key string, hlog hclog.Logger) (*sidecarChild, error) {
	raw, err := os.ReadFile(record)
	if err != nil {
		return nil, err
	}
	var rec reattachRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("reattach record %s: %w", record, err)
	}
	if rec.Key != key || rec.PID <= 0 {
		return nil, fmt.Errorf("reattach record %s is of other settings", record)
	}
	if err := syscall.Kill(rec.PID, 0); err != nil {
		return nil, fmt.Errorf("the sidecar of record (pid %d) is gone: %w", rec.PID, fs.ErrNotExist)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sidecar.Handshake,
		Plugins:          sidecar.Plugins(nil),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolNetRPC},
		Logger:           hlog,
		Reattach: &plugin.ReattachConfig{
			Protocol: plugin.Protocol(rec.Protocol), ProtocolVersion: rec.ProtocolVersion,
			Addr: &net.UnixAddr{Net: rec.Network, Name: rec.Addr}, Pid: rec.PID,
		},
	})
	child, err := handshakeChild(client, key)
	if err != nil {
		// Not killed: the pid may be another process's by now, and a
		// child of ours that no host uses stops on its own.
		return nil, fmt.Errorf("reattach to the sidecar pid %d: %w", rec.PID, err)
	}
	if child.info.Socket != rec.Socket {
		return nil, fmt.Errorf("the sidecar pid %d serves %s, not the socket of record %s", rec.PID, child.info.Socket, rec.Socket)
	}
	child.reattached = true
	return child, nil
}

// handshakeChild completes go-plugin's handshake (its app protocol
// version), checks the child's health (go-plugin's ping) and its frame
// protocol versions against this library's, and sends a first heartbeat.
func handshakeChild(client *plugin.Client, key string) (*sidecarChild, error) {
	rpcc, err := client.Client()
	if err != nil {
		return nil, err
	}
	if err := rpcc.Ping(); err != nil {
		return nil, fmt.Errorf("health check: %w", err)
	}
	raw, err := rpcc.Dispense(sidecar.PluginName)
	if err != nil {
		return nil, err
	}
	ag, ok := raw.(sidecar.Agent)
	if !ok {
		return nil, fmt.Errorf("the child serves %T, not the agent", raw)
	}
	info, err := ag.Info()
	if err != nil {
		return nil, err
	}
	if info.ProtocolMax < protocol.MinVersion || info.ProtocolMin > protocol.Version {
		return nil, fmt.Errorf("the child speaks frame protocol versions %d-%d, this library %d-%d: use the dbos-agent of this library's release",
			info.ProtocolMin, info.ProtocolMax, protocol.MinVersion, protocol.Version)
	}
	if info.Key != key {
		return nil, fmt.Errorf("the child runs other settings (%s, not %s)", info.Key, key)
	}
	if err := ag.Heartbeat(); err != nil {
		return nil, err
	}
	return &sidecarChild{client: client, agent: ag, info: info}, nil
}

// heartbeats tells the child it is used until stop.
func (c *sidecarChild) heartbeats(every time.Duration) {
	defer close(c.beatDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stopBeat:
			return
		case <-t.C:
			if err := c.agent.Heartbeat(); err != nil {
				c.log.Warn("the sidecar does not answer its heartbeat", zap.Int("pid", c.info.PID), zap.Error(err))
			}
		}
	}
}

// stop stops the child (go-plugin's Kill: a graceful quit, the child drains
// as serve does, then a kill two seconds on) and forgets its record.
func (c *sidecarChild) stop() {
	close(c.stopBeat)
	<-c.beatDone
	_ = os.Remove(c.record)
	c.client.Kill()
}

// AtExit stops the sidecar children of this process as it exits (the C
// side calls it from atexit): a host that exits stops its child at once;
// only one that crashed leaves it for a successor to reattach to. Embedded
// engines end with the process.
func (l *Library) AtExit() {
	l.engineMu.Lock()
	defer l.engineMu.Unlock()
	for key, e := range l.engines {
		if e.child != nil {
			e.child.stop()
			delete(l.engines, key)
		}
	}
}
