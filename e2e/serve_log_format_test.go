package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// serve --log-format text writes zap's console lines for people, and both
// formats write durations with their unit.
func TestServeLogFormats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		format   string
		listen   string
		duration *regexp.Regexp
	}{
		// Time, level, caller, message, fields.
		{"text", "\tINFO\tdbos-agent/serve.go:", regexp.MustCompile(`\tINFO\t\S+\tdraining: no new work is taken\t\{"grace_period": "1\.5s"\}$`)},
		{"json", `"level":"info"`, regexp.MustCompile(`"msg":"draining: no new work is taken","grace_period":"1\.5s"`)},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			socket := filepath.Join(e.dir, c.format+".sock")
			cmd := exec.Command(agentBinary, "serve", "--database-url", e.url, "--schema", e.schema, "--socket", socket,
				"--grace-period", "1500ms", "--log-format", c.format)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			lines := newLineWaiter(stderr)
			lines.waitForContaining(t, "dbos-agent listening")
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			lines.waitUntil(t, "the draining line", c.duration.MatchString)
			listening := ""
			for _, l := range lines.all() {
				if strings.Contains(l, "dbos-agent listening") {
					listening = l
				}
			}
			require.Contains(t, listening, c.listen)
		})
	}
}
