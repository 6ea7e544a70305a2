package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dbosPythonPath is the interpreter of the virtualenv with the official DBOS
// Python that scripts/dbos-python.sh makes, or DBOS_TEST_PYTHON's.
var dbosPythonPath = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("DBOS_TEST_PYTHON"); p != "" {
		return p, nil
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "dbos-python.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/dbos-python.sh: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

// What the official DBOS Python stores pickled (py_pickle, base64) the CLI
// shows decoded in its tables, and as stored with --json.
func TestCLIShowsDBOSPythonPicklesDecoded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	python, err := dbosPythonPath()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, python, filepath.Join("testdata", "dbos_pickles.py"), e.url, e.schema)
	out, err := run.CombinedOutput()
	require.NoError(t, err, string(out))

	db := []string{"--database-url", e.url, "--schema", e.schema}
	show := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := cli(t, append(args, db...)...)
		require.Equal(t, 0, code, stderr)
		return stdout
	}

	got := show("workflow", "get", "pickled-ok")
	require.Regexp(t, `(?m)^Serialization: +py_pickle$`, got)
	require.Regexp(t, `(?m)^Inputs: +\{'args': \('A-1', 3\), 'kwargs': \{\}\}$`, got)
	require.Regexp(t, `(?m)^Output: +\(3750, 'EUR'\)$`, got)

	got = show("workflow", "get", "pickled-error")
	require.Regexp(t, `(?m)^Error: +ValueError\('out of stock'\)$`, got)

	got = show("workflow", "steps", "pickled-ok")
	require.Contains(t, got, `{'sku': 'A-1', 'cents': 1250, 'tags': ['new', None], 'in_sto...`)

	got = show("workflow", "list", "--payloads")
	require.Regexp(t, `(?m)^pickled-ok .* \(3750, 'EUR'\)$`, got)
	require.Regexp(t, `(?m)^pickled-error .* error: ValueError\('out of stock'\)$`, got)

	// --json keeps the stored text, which DBOS's own clients decode.
	var stored map[string]any
	require.NoError(t, json.Unmarshal([]byte(show("workflow", "get", "pickled-ok", "--json")), &stored))
	require.Equal(t, "py_pickle", stored["serialization"])
	require.NotContains(t, stored["output"], "EUR")
	require.True(t, strings.HasPrefix(stored["output"].(string), "gA"), stored["output"]) // base64 of 0x80 (PROTO)
}
