package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

func TestExperimentUsage(t *testing.T) {
	for _, args := range [][]string{
		{"experiment"},
		{"experiment", "nope"},
		{"experiment", "boundary", "--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"experiment", "-h"}, &out, &errb); code != exitOK || !strings.Contains(errb.String(), "reset-race") {
		t.Errorf("-h: exit %d:\n%s", code, errb.String())
	}
}

// The subcommand runs an experiment (flags after the name), writes its
// files and prints its markdown.
func TestExperimentSubcommand(t *testing.T) {
	sluicetest.Require(t, "redis-server")
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"experiment", "reset-race", "--smoke", "-q", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	for _, f := range []string{"reset-race.csv", "reset-race.md", "reset-race.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "## 2. Two-command reset race") || !strings.Contains(errb.String(), "Sluice halves are skipped") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
}
