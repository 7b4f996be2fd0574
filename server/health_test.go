package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// get fetches path from the handler and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// infoLines returns INFO section's lines (without the heading).
func infoLines(t *testing.T, ts *sluicetest.Server, section string) []string {
	t.Helper()
	text, err := ts.Client.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\r\n") {
		if !strings.HasPrefix(l, "#") && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestHealthProbesFromLoadToShutdown: before a server exists (the process
// is loading) /healthz says ok, /readyz 503 "loading" and /metrics
// sluice_ready 0; once a real server is made with the Health, /readyz is
// 200 (verbose: each check passed), sluice_ready 1 and INFO says loading:0
// ready:1; once it closes, /readyz is 503 "shutting down" while /healthz
// still says ok.
func TestHealthProbesFromLoadToShutdown(t *testing.T) {
	h := server.NewHealth(server.HealthConfig{})
	probes := h.Handler()
	expect := func(path string, code int, body string) {
		t.Helper()
		if c, b := get(t, probes, path); c != code || !strings.Contains(b, body) {
			t.Fatalf("GET %s: %d %q; want %d with %q", path, c, b, code, body)
		}
	}
	expect("/healthz", 200, "ok\n")
	expect("/readyz", 503, "[-]loaded failed: loading the dataset from disk\nreadyz check failed\n")
	expect("/metrics", 200, "\nsluice_ready 0\n")
	expect("/metrics", 200, "\ngo_goroutines ")

	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{Health: h}})
	expect("/healthz", 200, "ok\n")
	if c, b := get(t, probes, "/readyz"); c != 200 || b != "ok\n" {
		t.Fatalf("GET /readyz once loaded: %d %q", c, b)
	}
	if c, b := get(t, probes, "/readyz?verbose"); c != 200 || b != "[+]loaded ok\n[+]shutdown ok\nreadyz check passed\n" {
		t.Fatalf("GET /readyz?verbose once loaded: %d %q", c, b)
	}
	ts.Do(t, "CL.THROTTLE", "k", "0", "1", "60")
	expect("/metrics", 200, "\nsluice_ready 1\n")
	expect("/metrics", 200, `sluice_decisions_total{outcome="allowed"} 1`)
	if got := infoLines(t, ts, "health"); strings.Join(got, ",") != "ready:1,ready_reason:ok" {
		t.Fatalf("INFO health: %q", got)
	}
	if got := infoLines(t, ts, "persistence"); len(got) < 3 || strings.Join(got[:3], ",") != "loading:0,async_loading:0,aof_enabled:0" {
		t.Fatalf("INFO persistence: %q", got)
	}

	ts.Close()
	expect("/readyz", 503, "[-]shutdown failed: shutting down\n")
	expect("/healthz", 200, "ok\n")
	expect("/metrics", 200, "\nsluice_ready 0\n")
}

// TestInfoLoadingFieldsAsRedis: INFO persistence opens with Redis's
// loading and async_loading lines, byte for byte (both servers idle).
func TestInfoLoadingFieldsAsRedis(t *testing.T) {
	r := sluicetest.StartRedis(t)
	ts := sluicetest.Start(t, sluicetest.Options{})
	first := func(network, addr string) string {
		reply := sluicetest.DialRaw(t, network, addr).Do(t, "INFO", "persistence")
		// Skip the bulk length (the sections' sizes differ): compare the
		// heading and the first two fields.
		_, body, _ := strings.Cut(reply, "\r\n")
		lines := strings.SplitN(body, "\r\n", 4)
		return strings.Join(lines[:3], "\r\n")
	}
	want := first(r.Network, r.Addr)
	if got := first("tcp", ts.Addr); got != want {
		t.Fatalf("INFO persistence begins\n%q\nRedis:\n%q", got, want)
	}
}

// raftBackend is an engine with the cluster facts set by the test, to
// check each readiness bound at its edge (the real Raft nodes are in
// cmd/sluice-server's TestReadyzOfACutOffFollower).
type raftBackend struct {
	*engine.Engine
	leader, hasLeader bool
	commit, applied   atomic.Uint64
	contact           atomic.Int64
}

func (b *raftBackend) ClusterView() engine.ClusterView {
	return engine.ClusterView{State: "Follower", CommitIndex: b.commit.Load(), Applied: b.applied.Load()}
}
func (b *raftBackend) Join(id, raftAddr, clientAddr string) error { return nil }
func (b *raftBackend) Forget(id string) error                     { return nil }
func (b *raftBackend) IsLeader() bool                             { return b.leader }
func (b *raftBackend) HasLeader() bool                            { return b.hasLeader }
func (b *raftBackend) CommitIndex() uint64                        { return b.commit.Load() }
func (b *raftBackend) AppliedIndex() uint64                       { return b.applied.Load() }
func (b *raftBackend) LastLeaderContact() time.Duration           { return time.Duration(b.contact.Load()) }
func (b *raftBackend) LeaderChanges() uint64                      { return 3 }

// TestReadyzClusterBounds: a follower is ready while its apply lag is at
// most --ready-max-apply-lag and its last contact at most
// --ready-max-last-contact, and not past either; the reason names the
// check and the figures; the raft metrics carry the same facts.
func TestReadyzClusterBounds(t *testing.T) {
	eng := engine.New(engine.Config{Shards: 2})
	defer eng.Close()
	b := &raftBackend{Engine: eng, hasLeader: true}
	b.commit.Store(5000)
	b.applied.Store(4000)
	b.contact.Store(int64(2 * time.Second))
	h := server.NewHealth(server.HealthConfig{MaxApplyLag: 1000, MaxLastContact: 2 * time.Second})
	srv := server.New(server.Config{Health: h}, b)
	defer srv.Close()
	probes := h.Handler()

	if c, body := get(t, probes, "/readyz?verbose"); c != 200 ||
		body != "[+]loaded ok\n[+]shutdown ok\n[+]leader ok\n[+]leader-contact ok\n[+]apply-lag ok\nreadyz check passed\n" {
		t.Fatalf("at both bounds: %d %q", c, body)
	}
	_, metrics := get(t, probes, "/metrics")
	for _, want := range []string{"\nsluice_ready 1\n", "\nsluice_raft_commit_index 5000\n", "\nsluice_raft_applied_index 4000\n",
		"\nsluice_raft_leader_changes_total 3\n", "\nsluice_raft_last_contact_seconds 2\n"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}

	b.applied.Store(3999)
	if c, body := get(t, probes, "/readyz"); c != 503 ||
		body != "[-]apply-lag failed: applied index 3999 is 1001 entries behind commit index 5000 (bound 1000)\nreadyz check failed\n" {
		t.Fatalf("one entry past the lag bound: %d %q", c, body)
	}
	b.applied.Store(5000)
	b.contact.Store(int64(2*time.Second + time.Millisecond))
	if c, body := get(t, probes, "/readyz"); c != 503 ||
		body != "[-]leader-contact failed: last heard from a leader 2.001s ago (bound 2s)\nreadyz check failed\n" {
		t.Fatalf("past the contact bound: %d %q", c, body)
	}
	if ok, reason := h.Ready(); ok || reason != "leader-contact: last heard from a leader 2.001s ago (bound 2s)" {
		t.Fatalf("Ready: %v %q", ok, reason)
	}
	b.hasLeader = false
	if c, body := get(t, probes, "/readyz"); c != 503 || !strings.HasPrefix(body, "[-]leader failed: no leader known\n[-]leader-contact failed") {
		t.Fatalf("no leader: %d %q", c, body)
	}
}
