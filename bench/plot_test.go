package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWritePlots(t *testing.T) {
	results := []Result{
		{Target: "sluice", Mode: "cl.throttle", Family: "gcra", Conns: 50, Pipeline: 16, Throughput: 700000, Latency: Latency{P50: time.Millisecond, P99: 3 * time.Millisecond, P999: 5 * time.Millisecond}},
		{Target: "redis", Mode: "lua-gcra", Family: "gcra", Conns: 50, Pipeline: 16, Throughput: 130000, Latency: Latency{P50: 6 * time.Millisecond, P99: 10 * time.Millisecond, P999: 12 * time.Millisecond}},
	}
	files, err := WritePlots(filepath.Join(t.TempDir(), "run.png"), results)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s is not a PNG: %v", f, err)
		}
	}
	if _, err := WritePlots("x.png", nil); err == nil {
		t.Fatal("plotting no results succeeded")
	}
}
