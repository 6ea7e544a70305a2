package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:3001": true, "localhost:3001": true, "[::1]:3001": true, "127.1.2.3:0": true,
		":3001": false, "0.0.0.0:3001": false, "[::]:3001": false, "10.0.0.5:3001": false, "admin.example.com:3001": false,
	} {
		got, err := IsLoopback(addr)
		require.NoError(t, err, addr)
		require.Equal(t, want, got, addr)
	}
	_, err := IsLoopback("3001")
	require.Error(t, err)
}

func TestListenBeyondLoopbackNeedsToken(t *testing.T) {
	_, err := Listen("0.0.0.0:0", Config{})
	require.ErrorIs(t, err, ErrTokenRequired)
}

func TestExtraRoutesShareTheToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := NewHandler(Config{Token: "t", Routes: []Route{
		{Pattern: "GET /metrics", Handler: ok},
		{Pattern: "GET /open", Handler: ok, Open: true},
	}})
	call := func(path, auth string) int {
		req := httptest.NewRequest("GET", path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusUnauthorized, call("/metrics", ""))
	require.Equal(t, http.StatusUnauthorized, call("/metrics", "Bearer wrong"))
	require.Equal(t, http.StatusOK, call("/metrics", "Bearer t"))
	require.Equal(t, http.StatusOK, call("/open", ""))
	require.Equal(t, http.StatusOK, call("/livez", ""))
}
