package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The version make stamps into the binary with -ldflags -X is what
// `dbos-agent --version` and `dbos-agent version` print.
func TestVersionIsStampedAtBuildTime(t *testing.T) {
	t.Parallel()
	const stamped = "v9.8.7-e2e-stamp"

	// make build and make lib pass the stamp to the linker.
	plan, err := exec.Command("make", "-s", "-n", "-C", "..", "build", "VERSION="+stamped).CombinedOutput()
	require.NoError(t, err, string(plan))
	require.Contains(t, string(plan), `-ldflags "-X main.version=`+stamped)
	require.Contains(t, string(plan), `-buildmode=c-shared -ldflags "-X main.version=`+stamped)
	// The library's dbos_version reports it too.
	require.Contains(t, string(plan), "internal/libdbos.Version="+stamped+`"`)

	binary := filepath.Join(t.TempDir(), "dbos-agent")
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+stamped, "-o", binary, "../cmd/dbos-agent")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(binary, args...).Output()
		require.NoError(t, err, args)
		require.Equal(t, "dbos-agent "+stamped+" (system schema 125)\n", string(out), args)
	}

	// The binary the other tests run, built without a stamp, says so.
	out, err = exec.Command(agentBinary, "--version").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "dbos-agent dev ")
}
