package libdbos

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The modes of a handle.
const (
	ModeEmbedded = "embedded"
	ModeSidecar  = "sidecar"
	ModeConnect  = "connect"
)

// Config is what dbos_open takes (cgo/README.md, "The config").
type Config struct {
	Mode               string   `json:"mode" msgpack:"mode"`
	DatabaseURL        string   `json:"database_url" msgpack:"database_url"`
	Schema             string   `json:"schema" msgpack:"schema"`
	ExecutorID         string   `json:"executor_id" msgpack:"executor_id"`
	ApplicationVersion string   `json:"application_version" msgpack:"application_version"`
	LogLevel           string   `json:"log_level" msgpack:"log_level"`
	AgentPath          string   `json:"agent_path" msgpack:"agent_path"`
	RuntimeDir         string   `json:"runtime_dir" msgpack:"runtime_dir"`
	OrphanGraceSec     float64  `json:"orphan_grace_sec" msgpack:"orphan_grace_sec"`
	Socket             string   `json:"socket" msgpack:"socket"`
	TrustedUIDs        []uint32 `json:"trusted_uids" msgpack:"trusted_uids"`
}

// ParseConfig reads a JSON object (first byte '{', after blanks) or a
// msgpack map; unknown keys and keys of another mode are refused.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if len(raw) == 0 {
		return c, errorf(ErrInvalid, "config: empty (a JSON object or a msgpack map)")
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return c, errorf(ErrInvalid, "config (JSON): %v", err)
		}
		if dec.More() {
			return c, errorf(ErrInvalid, "config (JSON): more than one value")
		}
	} else {
		dec := msgpack.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields(true)
		if err := dec.Decode(&c); err != nil {
			return c, errorf(ErrInvalid, "config (msgpack): %v", err)
		}
	}
	if c.Mode == "" {
		c.Mode = ModeEmbedded
	}
	if c.DatabaseURL == "" && (c.Mode == ModeEmbedded || c.Mode == ModeSidecar) {
		// As `dbos-agent serve` without a URL: the user's default SQLite
		// file, so a library user has nothing to install either. Handles
		// that leave it out share that engine.
		path, err := sysdb.DefaultSQLitePath()
		if err != nil {
			return c, errorf(ErrInvalid, "config: %v", err)
		}
		c.DatabaseURL = sysdb.SQLiteURL(path)
	}
	if err := c.check(); err != nil {
		return c, errorf(ErrInvalid, "config: %v", err)
	}
	return c, nil
}

func (c *Config) check() error {
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level %q: use debug, info, warn or error", c.LogLevel)
	}
	engine := c.Schema != "" || c.ExecutorID != "" || c.ApplicationVersion != "" || c.LogLevel != ""
	switch c.Mode {
	case ModeEmbedded, ModeSidecar:
		if c.Socket != "" || c.TrustedUIDs != nil {
			return fmt.Errorf("socket and trusted_uids are keys of mode connect, not %s", c.Mode)
		}
		if c.Mode == ModeEmbedded && (c.AgentPath != "" || c.RuntimeDir != "" || c.OrphanGraceSec != 0) {
			return fmt.Errorf("agent_path, runtime_dir and orphan_grace_sec are keys of mode sidecar, not embedded")
		}
		if c.OrphanGraceSec < 0 || c.OrphanGraceSec > 86400 {
			return fmt.Errorf("orphan_grace_sec must be from 0 (the default, 30) to 86400, not %v", c.OrphanGraceSec)
		}
	case ModeConnect:
		if engine || c.DatabaseURL != "" || c.AgentPath != "" || c.RuntimeDir != "" || c.OrphanGraceSec != 0 {
			return fmt.Errorf("mode connect takes only socket and trusted_uids: the agent it connects to has its own database and settings")
		}
	default:
		return fmt.Errorf("mode %q: use embedded, sidecar or connect", c.Mode)
	}
	return nil
}

// engineKey names the engine (embedded) or child (sidecar) a handle shares
// with the others of the same settings.
type engineKey struct {
	mode, databaseURL, schema, executorID string
}

func (c *Config) engineKey() engineKey {
	return engineKey{mode: c.Mode, databaseURL: c.DatabaseURL, schema: c.Schema, executorID: c.ExecutorID}
}
