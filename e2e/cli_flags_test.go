package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every enumerated flag refuses a value outside its set with one line naming
// the flag and the values it takes, and a non-zero exit, rather than an
// empty table.
func TestCLIRefusesUnknownValuesOfEnumeratedFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(agentOptions{}) // migrates the schema the listings read
	db := []string{"--database-url", e.url, "--schema", e.schema}
	socket := filepath.Join(e.dir, "refused.sock")

	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"workflow status", []string{"workflow", "list", "--status", "BOGUS"},
			`--status: "BOGUS" is not one of PENDING, ENQUEUED, DELAYED, SUCCESS, ERROR, CANCELLED, MAX_RECOVERY_ATTEMPTS_EXCEEDED`},
		{"workflow status among valid ones", []string{"workflow", "list", "--status", "success,finished"},
			`--status: "finished" is not one of PENDING,`},
		{"workflow sort", []string{"workflow", "list", "--sort", "sideways"},
			`--sort: "sideways" is not one of ASC, DESC`},
		{"queued workflow sort", []string{"workflow", "queue", "list", "--sort", "newest"},
			`--sort: "newest" is not one of ASC, DESC`},
		{"schedule status", []string{"schedule", "list", "--status", "RUNNING"},
			`--status: "RUNNING" is not one of ACTIVE, PAUSED`},
		{"serve log level", []string{"serve", "--socket", socket, "--log-level", "loud"},
			`log level "loud": use debug, info, warn or error`},
		{"serve log format", []string{"serve", "--socket", socket, "--log-format", "yaml"},
			`log format "yaml": use text or json`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, append(c.args, db...)...)
			require.Equal(t, 1, code, stderr)
			require.Empty(t, stdout)
			require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
			require.Contains(t, stderr, c.wantErr)
		})
	}

	// The valid values, in any case, are accepted.
	for _, args := range [][]string{
		{"workflow", "list", "--status", "success,Error,MAX_RECOVERY_ATTEMPTS_EXCEEDED,delayed"},
		{"schedule", "list", "--status", "active,PAUSED"},
		{"workflow", "list", "--sort", "asc"},
		{"workflow", "list", "--sort", "DESC"},
	} {
		_, stderr, code := cli(t, append(args, db...)...)
		require.Equal(t, 0, code, stderr)
	}
}
