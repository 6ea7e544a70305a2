package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/admin"
)

// The page works offline: nothing it ships names another origin.
func TestPageFetchesNothingFromElsewhere(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	require.NoError(t, fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		raw, err := static.ReadFile(path)
		require.NoError(t, err)
		require.Empty(t, external.FindAllString(string(raw), -1), "%s names another origin", path)
		return nil
	}))
}

// The page and its script are served without the token; the reads need it.
func TestPageIsOpenAndReadsAreGuarded(t *testing.T) {
	srv := httptest.NewServer(admin.NewHandler(admin.Config{Token: "t", Routes: Routes(nil)}))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get("/ui/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<script src="app.js">`)
	status, _ = get("/ui/app.js")
	require.Equal(t, http.StatusOK, status)
	for _, read := range []string{"/ui/api/workflows", "/ui/api/workflows/x", "/ui/api/queues", "/ui/api/schedules", "/ui/api/versions"} {
		status, _ = get(read)
		require.Equal(t, http.StatusUnauthorized, status, read)
	}
}

// A list page outside its bounds is refused before anything is read.
func TestListRefusesABadPage(t *testing.T) {
	srv := httptest.NewServer(admin.NewHandler(admin.Config{Routes: Routes(nil)}))
	defer srv.Close()
	for _, query := range []string{"limit=0", "limit=1001", "limit=ten", "offset=-1", "limit=-5", "order=sideways", "created_after=yesterday", "created_before=2026-13-01T00:00:00Z"} {
		resp, err := http.Get(srv.URL + "/ui/api/workflows?" + query)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", query, body)
		require.Contains(t, string(body), `"error"`, query)
	}
}
