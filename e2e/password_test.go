package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// withoutPassword is rawURL without its password.
func withoutPassword(t *testing.T, rawURL string) (stripped, password string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	password, ok := u.User.Password()
	require.True(t, ok, "the test database URL has a password")
	u.User = url.User(u.User.Username())
	return u.String(), password
}

// passwordlessEnv is the test's environment without any password source
// but those given (libpq's ~/.pgpass included).
func passwordlessEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PGPASSWORD", "PGPASSFILE", "DBOS_SYSTEM_DATABASE_PASSWORD", "DBOS_SYSTEM_DATABASE_PASSWORD_FILE":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "PGPASSFILE=/nonexistent"), extra...)
}

func TestTheDatabasePasswordNeedNotBeInTheURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bare, password := withoutPassword(t, e.url)
	secret := filepath.Join(e.dir, "password")
	require.NoError(t, os.WriteFile(secret, []byte(password+"\n"), 0o600))

	// serve with a password file.
	agent := e.startAgent(agentOptions{databaseURL: bare, extraArgs: []string{"--database-password-file", secret},
		env: passwordlessEnv()})
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpPing, protocol.Empty{}, nil))
	require.NotContains(t, agent.log(), ":"+password+"@")
	require.NotContains(t, agent.log(), "password="+password)

	db := []string{"--database-url", bare, "--schema", e.schema}
	list := append([]string{"workflow", "list"}, db...)
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", passwordlessEnv(), []string{"--database-password-file", secret}},
		{"file env", passwordlessEnv("DBOS_SYSTEM_DATABASE_PASSWORD_FILE=" + secret), nil},
		{"password env", passwordlessEnv("DBOS_SYSTEM_DATABASE_PASSWORD=" + password), nil},
		// pgx reads libpq's variables when the URL has no password.
		{"PGPASSWORD", passwordlessEnv("PGPASSWORD=" + password), nil},
	}
	for _, tc := range cases {
		_, stderr, code := cliWithEnv(t, tc.env, append(list, tc.args...)...)
		require.Equal(t, 0, code, "%s: %s", tc.name, stderr)
	}
	pgpass := filepath.Join(e.dir, "pgpass")
	require.NoError(t, os.WriteFile(pgpass, []byte("*:*:*:*:"+password+"\n"), 0o600))
	_, stderr, code := cliWithEnv(t, append(passwordlessEnv(), "PGPASSFILE="+pgpass), list...)
	require.Equal(t, 0, code, "PGPASSFILE: %s", stderr)
	out, stderr, code := cliWithEnv(t, passwordlessEnv(), append([]string{"migrate", "--database-password-file", secret}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "up to date")

	// Without a password the login fails, in one line.
	_, stderr, code = cliWithEnv(t, passwordlessEnv(), list...)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, "password authentication failed")

	// A wrong password file is one clear line that does not show it.
	wrong := filepath.Join(e.dir, "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-password-7f3a\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serve := exec.CommandContext(ctx, agentBinary, "serve", "--database-url", bare, "--schema", e.schema,
		"--socket", filepath.Join(e.dir, "wrong.sock"), "--database-password-file", wrong)
	serve.Env = passwordlessEnv()
	var serveErr strings.Builder
	serve.Stderr = &serveErr
	require.Error(t, serve.Run())
	require.NotEqual(t, 0, serve.ProcessState.ExitCode())
	lines := strings.Split(strings.TrimSpace(serveErr.String()), "\n")
	last := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(last, "dbos-agent: "), serveErr.String())
	require.Contains(t, last, "password authentication failed")
	require.NotContains(t, serveErr.String(), "not-the-password-7f3a")

	for file, want := range map[string]string{
		filepath.Join(e.dir, "missing"):  "read the database password file",
		writeFile(t, e.dir, "empty", ""): "is empty",
	} {
		_, stderr, code := cliWithEnv(t, passwordlessEnv(), append(list, "--database-password-file", file)...)
		require.Equal(t, 1, code)
		require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
		require.Contains(t, stderr, want)
		require.Contains(t, stderr, file)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
