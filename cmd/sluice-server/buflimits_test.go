package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// client-output-buffer-limit and client-query-buffer-limit from a config
// file (one class a line, as Redis's files give them) and from flags reach
// the running server, and bad values stop start-up.
func TestBufferLimitSettings(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sluice.conf")
	os.WriteFile(conf, []byte("client-output-buffer-limit normal 1mb 0 0\nclient-output-buffer-limit replica 128mb 32mb 30\n"), 0o644)
	ready, _ := startBinaryReady(t, conf, "--port", "auto", "--dir", dir, "--appendonly", "no",
		"--client-output-buffer-limit", "pubsub 1 2 3", "--client-query-buffer-limit", "2mb")
	rdb := client(ready["addr"])
	defer rdb.Close()
	got, err := rdb.ConfigGet(context.Background(), "client-*-buffer-limit").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := "normal 1048576 0 0 slave 134217728 33554432 30 pubsub 1 2 3"; got["client-output-buffer-limit"] != want {
		t.Fatalf("client-output-buffer-limit %q, want %q", got["client-output-buffer-limit"], want)
	}
	if want := "2097152"; got["client-query-buffer-limit"] != want {
		t.Fatalf("client-query-buffer-limit %q, want %q", got["client-query-buffer-limit"], want)
	}

	for _, args := range [][]string{
		{"--client-output-buffer-limit", "normal 1mb 0"},
		{"--client-output-buffer-limit", "master 0 0 0"},
		{"--client-query-buffer-limit", "1k"},
		{"--client-query-buffer-limit", "lots"},
	} {
		var stderr strings.Builder
		if code := run(append([]string{"--port", "0", "--dir", dir}, args...), &stderr); code != 2 {
			t.Fatalf("%q: exit %d, want 2\n%s", args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "buffer limit") && !strings.Contains(stderr.String(), "argument must be") {
			t.Fatalf("%q: no reason given:\n%s", args, stderr.String())
		}
	}
}
