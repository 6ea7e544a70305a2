package e2e

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeDist: `make dist` packs one versioned archive for a host with the
// binary, the library and its header, the systemd unit, README and LICENSE
// under one top directory; the binary in it runs, and the unit in it passes
// `systemd-analyze verify` with its ExecStart pointed at that binary. It
// builds into a directory of its own (BIN, LIB), never over bin/ or
// cgo/libdbos.so, which other tests load meanwhile.
func TestMakeDist(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	distDir := filepath.Join(out, "dist")
	const version = "9.8.7-e2e"
	dist := exec.Command("make", "-C", "..", "--no-print-directory", "dist", "VERSION="+version,
		"DIST_DIR="+distDir, "BIN="+filepath.Join(out, "bin"), "LIB="+filepath.Join(out, "libdbos.so"))
	logs, err := dist.CombinedOutput()
	require.NoError(t, err, "make dist:\n%s", logs)

	top := "dbos-agent-" + version + "-" + goEnv(t, "GOOS") + "-" + goEnv(t, "GOARCH")
	archive := filepath.Join(distDir, top+".tar.gz")
	require.FileExists(t, archive)
	extracted := filepath.Join(out, "extracted")
	files := extractTarGz(t, archive, extracted)
	require.Equal(t, []string{
		top + "/LICENSE",
		top + "/README.md",
		top + "/bin/dbos-agent",
		top + "/include/libdbos.h",
		top + "/lib/libdbos.so",
		top + "/systemd/dbos-agent@.service",
	}, files)

	binary := filepath.Join(extracted, top, "bin", "dbos-agent")
	help, err := exec.Command(binary, "--help").CombinedOutput()
	require.NoError(t, err, "%s --help:\n%s", binary, help)
	require.Contains(t, string(help), "serve")

	// The unit as shipped, but for the binary's path (verify checks that
	// ExecStart is executable), instantiated for the user running the test.
	unit, err := os.ReadFile(filepath.Join(extracted, top, "systemd", "dbos-agent@.service"))
	require.NoError(t, err)
	require.Contains(t, string(unit), "ExecStart=/usr/local/bin/dbos-agent serve")
	unitDir := filepath.Join(out, "units")
	require.NoError(t, os.Mkdir(unitDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(unitDir, "dbos-agent@.service"),
		[]byte(strings.ReplaceAll(string(unit), "/usr/local/bin/dbos-agent", binary)), 0o644))
	analyze, err := exec.Command("bash", "../scripts/systemd-analyze.sh").Output()
	require.NoError(t, err, "scripts/systemd-analyze.sh")
	me, err := user.Current()
	require.NoError(t, err)
	verify := exec.Command(strings.TrimSpace(string(analyze)), "verify", "--man=no",
		filepath.Join(unitDir, "dbos-agent@"+me.Username+".service"))
	verified, err := verify.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", verified)
	// verify exits 0 on some findings it only prints.
	require.Empty(t, strings.TrimSpace(string(verified)), "systemd-analyze verify")
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	value, err := exec.Command("go", "env", name).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(value))
}

// extractTarGz unpacks archive into dir and returns its regular files'
// names, sorted.
func extractTarGz(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.False(t, strings.Contains(h.Name, ".."), h.Name)
		target := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(target, 0o755))
		case tar.TypeReg:
			require.Zero(t, h.Uid, "%s is root's in the archive", h.Name)
			require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
			w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			require.NoError(t, err)
			_, err = io.Copy(w, tr)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			files = append(files, h.Name)
		default:
			t.Fatalf("unexpected entry %s (type %c) in the archive", h.Name, h.Typeflag)
		}
	}
	sort.Strings(files)
	return files
}
