package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// probedServer is a sluice-server started with --metrics-addr, known from
// the moment its probes listen, before it has loaded its state.
type probedServer struct {
	probes string                 // host:port of /healthz, /readyz, /metrics
	ready  chan map[string]string // the ready line's fields, once logged
	cmd    *exec.Cmd
}

// startProbed starts sluice-server on a free port with a metrics listener
// and returns as soon as that listener is up.
func startProbed(t *testing.T, args ...string) *probedServer {
	t.Helper()
	cmd := exec.Command(sluicetest.Binary(t), withTestRaftTimings(append([]string{"--port", "auto", "--metrics-addr", "127.0.0.1:0"}, args...))...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ps := &probedServer{ready: make(chan map[string]string, 1), cmd: cmd}
	probes := make(chan string, 1)
	go func() {
		field := regexp.MustCompile(`(\w+)=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log(line)
			f := map[string]string{}
			for _, m := range field.FindAllStringSubmatch(line, -1) {
				f[m[1]] = m[2]
			}
			switch {
			case strings.Contains(line, `msg="serving Prometheus metrics and health probes"`):
				probes <- f["metrics_addr"]
			case strings.Contains(line, `msg="Ready to accept connections"`):
				ps.ready <- f
			}
		}
	}()
	select {
	case ps.probes = <-probes:
		return ps
	case <-time.After(30 * time.Second):
		t.Fatal("sluice-server did not log its probes' address")
	}
	return nil
}

// addr waits for the ready line and returns the client address.
func (ps *probedServer) addr(t *testing.T) string {
	t.Helper()
	select {
	case f := <-ps.ready:
		ps.ready <- f
		return f["addr"]
	case <-time.After(30 * time.Second):
		t.Fatal("sluice-server did not log its ready line")
	}
	return ""
}

var probeClient = &http.Client{Timeout: 5 * time.Second}

// probe GETs path and returns the status and body.
func (ps *probedServer) probe(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := probeClient.Get("http://" + ps.probes + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric returns the value of the sample named exactly name (with its
// labels, if any) in a /metrics body, and whether there is one.
func metric(body, name string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// infoField returns field's value in INFO section.
func infoValue(t *testing.T, rdb *redis.Client, section, field string) string {
	t.Helper()
	text, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, text)
	return ""
}

// TestReadyzWhileLoadingASnapshot: a server restarting from a snapshot of
// 200,000 keys answers /healthz 200 and /readyz 503 "loading" (and
// sluice_ready 0) while it loads, then /readyz 200 with every key loaded,
// and INFO says loading:0 ready:1. --key-load-delay (Redis's test aid)
// paces the load to at least 2 s, so the probes' answers during it do not
// depend on how fast this machine loads.
func TestReadyzWhileLoadingASnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary twice")
	}
	ctx := context.Background()
	dir := t.TempDir()
	addr, cmd := startBinary(t, "--dir", dir, "--appendfsync", "no")
	rdb := client(addr)
	const keys = 200_000
	for start := 0; start < keys; start += 10_000 {
		p := rdb.Pipeline()
		for i := start; i < start+10_000; i++ {
			p.Set(ctx, "key:"+strconv.Itoa(i), "v", 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	killHard(t, cmd)

	ps := startProbed(t, "--dir", dir, "--key-load-delay", "10") // 10 us x 200,000 keys: 2 s or more
	var loading int
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, body := ps.probe(t, "/healthz"); code != 200 || body != "ok\n" {
			t.Fatalf("/healthz during start-up: %d %q", code, body)
		}
		code, body := ps.probe(t, "/readyz")
		if code == 200 {
			break
		}
		if code != 503 || !strings.Contains(body, "[-]loaded failed: loading the dataset from disk") {
			t.Fatalf("/readyz during the load: %d %q", code, body)
		}
		if loading++; loading == 1 {
			_, m := ps.probe(t, "/metrics")
			if v, ok := metric(m, "sluice_ready"); !ok || v != 0 {
				t.Fatalf("sluice_ready while loading: %v %v", v, ok)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still 503 after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if loading == 0 {
		t.Fatal("/readyz never answered 503 while a paced load of 2 s or more ran")
	}
	t.Logf("/readyz answered 503 to %d polls during the load, then 200", loading)

	rdb = client(ps.addr(t))
	defer rdb.Close()
	if n := rdb.DBSize(ctx).Val(); n != keys {
		t.Fatalf("ready with %d keys loaded of %d", n, keys)
	}
	if v := infoValue(t, rdb, "persistence", "loading"); v != "0" {
		t.Fatalf("INFO loading:%s once ready", v)
	}
	if v := infoValue(t, rdb, "health", "ready"); v != "1" {
		t.Fatalf("INFO ready:%s once ready", v)
	}
	_, m := ps.probe(t, "/metrics")
	if v, ok := metric(m, "sluice_ready"); !ok || v != 1 {
		t.Fatalf("sluice_ready once ready: %v %v", v, ok)
	}
}

// TestMetricsOfAStandaloneServer: a running server's /metrics carries
// sluice_ready and the append-only file's fsync histogram (under
// appendfsync always, an fsync per write), and no raft metrics.
func TestMetricsOfAStandaloneServer(t *testing.T) {
	ps := startProbed(t, "--dir", t.TempDir(), "--appendfsync", "always")
	rdb := client(ps.addr(t))
	defer rdb.Close()
	for i := range 50 {
		if err := rdb.Do(context.Background(), "CL.THROTTLE", "m:"+strconv.Itoa(i), "5", "1", "60").Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, m := ps.probe(t, "/metrics")
	if v, ok := metric(m, "sluice_ready"); !ok || v != 1 {
		t.Fatalf("sluice_ready: %v %v", v, ok)
	}
	count, ok := metric(m, "sluice_fsync_duration_seconds_count")
	if !ok || count < 50 {
		t.Fatalf("sluice_fsync_duration_seconds_count %v (%v) after 50 writes under always:\n%s", count, ok, m)
	}
	for _, le := range []string{"5e-05", "0.001", "1", "+Inf"} {
		if _, ok := metric(m, `sluice_fsync_duration_seconds_bucket{le="`+le+`"}`); !ok {
			t.Fatalf("no fsync bucket le=%s:\n%s", le, m)
		}
	}
	if inf, _ := metric(m, `sluice_fsync_duration_seconds_bucket{le="+Inf"}`); inf != count {
		t.Fatalf("+Inf bucket %v, count %v", inf, count)
	}
	if strings.Contains(m, "sluice_raft_") {
		t.Fatal("a standalone server reports raft metrics")
	}
}

// freePort returns a loopback port nothing listens on (for a moment).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestReadyzOfACutOffFollower: three real processes as one Raft group. The
// third node's Raft port is behind a fault proxy (it announces the proxy),
// so refusing the proxy's connections cuts every link into it. Cut off,
// it answers /readyz 503, first for its lost leader and then, past
// --ready-max-last-contact, for the silence too, and INFO and /metrics
// say the same; the leader and the connected follower answer 200 all the
// while. Healed, it answers 200 again. Every node's /metrics carries the
// raft metrics.
func TestReadyzOfACutOffFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	ctx := context.Background()
	// Raft timings twice the defaults, so a CPU-starved test machine does
	// not miss the connected nodes' heartbeats; the readiness bound above
	// the heartbeat timeout, so the contact check fails after the leader
	// check.
	bound := []string{"--ready-max-last-contact", "3s",
		"--cluster-heartbeat-timeout", "1s", "--cluster-election-timeout", "1s", "--cluster-lease-timeout", "500ms"}
	n1 := startProbed(t, append(bound, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-bootstrap", "yes")...)
	addr1 := n1.addr(t)
	n2 := startProbed(t, append(bound, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-join", addr1)...)
	raft3 := "127.0.0.1:" + freePort(t)
	proxy := sluicetest.Proxy(t, raft3)
	n3 := startProbed(t, append(bound, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-join", addr1,
		"--cluster-raft-addr", raft3, "--cluster-announce-raft-addr", proxy.Addr())...)
	nodes := []*probedServer{n1, n2, n3}
	c3 := client(n3.addr(t))
	defer c3.Close()
	c1 := client(addr1)
	defer c1.Close()
	allReady := func() bool {
		for _, n := range nodes {
			if code, _ := n.probe(t, "/readyz"); code != 200 {
				return false
			}
		}
		return true
	}
	sluicetest.WaitFor(t, 30*time.Second, "three nodes, all ready", func() bool {
		info, _ := c1.Do(ctx, "CLUSTER", "INFO").Text()
		return strings.Contains(info, "cluster_known_nodes:3") && allReady()
	})
	if role := c3.Do(ctx, "ROLE").Val().([]any); role[0] != "slave" {
		t.Fatalf("the third node leads (ROLE %v): cutting its inbound links would not cut it off", role)
	}
	for _, n := range nodes {
		_, m := n.probe(t, "/metrics")
		for _, name := range []string{"sluice_ready", "sluice_raft_commit_index", "sluice_raft_applied_index", "sluice_raft_leader_changes_total"} {
			if v, ok := metric(m, name); !ok || (name != "sluice_raft_applied_index" && v < 1) {
				t.Fatalf("%s: %s %v (%v)", n.probes, name, v, ok)
			}
		}
	}
	if _, m := n3.probe(t, "/metrics"); !strings.Contains(m, "\nsluice_raft_last_contact_seconds ") {
		t.Fatalf("a follower without sluice_raft_last_contact_seconds:\n%s", m)
	}

	cut := time.Now()
	proxy.SetMode(faultproxy.Refuse)
	var notReadyAfter time.Duration
	sluicetest.WaitFor(t, 20*time.Second, "the cut-off follower to fail /readyz for its leader and then its last contact", func() bool {
		for _, n := range []*probedServer{n1, n2} {
			if code, body := n.probe(t, "/readyz?verbose"); code != 200 {
				t.Fatalf("%s, still connected, not ready while the follower is cut off: %d %q", n.probes, code, body)
			}
		}
		code, body := n3.probe(t, "/readyz?verbose")
		if code == 200 {
			return false
		}
		if code != 503 || !strings.Contains(body, "[-]leader failed: no leader known\n") {
			t.Fatalf("cut-off follower: %d %q", code, body)
		}
		if notReadyAfter == 0 {
			notReadyAfter = time.Since(cut)
		}
		return strings.Contains(body, "[-]leader-contact failed: last heard from a leader ")
	})
	t.Logf("the cut-off follower answered 503 %v after the cut", notReadyAfter.Round(time.Millisecond))
	if v := infoValue(t, c3, "health", "ready"); v != "0" {
		t.Fatalf("INFO ready:%s on the cut-off follower", v)
	}
	if v := infoValue(t, c3, "health", "ready_reason"); v != "leader: no leader known" {
		t.Fatalf("INFO ready_reason:%s on the cut-off follower", v)
	}
	if v := infoValue(t, c3, "replication", "master_link_status"); v != "down" {
		t.Fatalf("INFO master_link_status:%s on the cut-off follower", v)
	}
	if v := infoValue(t, c3, "replication", "master_link_down_since_seconds"); v == "0" || v == "-1" {
		t.Fatalf("INFO master_link_down_since_seconds:%s after 3 s of silence", v)
	}
	_, m := n3.probe(t, "/metrics")
	if v, _ := metric(m, "sluice_ready"); v != 0 {
		t.Fatalf("sluice_ready %v on the cut-off follower", v)
	}
	if v, _ := metric(m, "sluice_raft_last_contact_seconds"); v <= 3 {
		t.Fatalf("sluice_raft_last_contact_seconds %v on a follower cut off past the 3 s bound", v)
	}
	// Committed while the follower is away: it must apply it to be ready.
	if err := c1.Do(ctx, "CL.THROTTLE", "while-cut", "5", "1", "60").Err(); err != nil {
		t.Fatal(err)
	}

	proxy.SetMode(faultproxy.Forward)
	sluicetest.WaitFor(t, 30*time.Second, "every node ready after the link heals", allReady)
	if v := infoValue(t, c3, "health", "ready"); v != "1" {
		t.Fatalf("INFO ready:%s on the healed follower", v)
	}
	if v := infoValue(t, c3, "replication", "master_link_status"); v != "up" {
		t.Fatalf("INFO master_link_status:%s on the healed follower", v)
	}
}
