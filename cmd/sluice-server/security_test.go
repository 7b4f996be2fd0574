package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// A cluster member on an address others can reach, with neither TLS nor a
// cluster secret, refuses to start, and says why and what to set.
func TestClusterWithoutCredentialsRefusesNonLoopback(t *testing.T) {
	cmd := exec.Command(sluicetest.Binary(t), "--port", "auto", "--dir", t.TempDir(), "--cluster-enabled", "yes",
		"--cluster-bootstrap", "yes", "--cluster-announce-raft-addr", "10.255.0.1:17000")
	var out bytes.Buffer
	cmd.Stderr = &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("started anyway")
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running: an unauthenticated non-loopback cluster started")
	}
	for _, want := range []string{"protected mode", "10.255.0.1:17000", "tls-cluster yes", "cluster-secret"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out.String())
		}
	}
}

// Three real processes over mutual TLS with certificates from
// --cluster-gen-certs: they form a group and decide; ACL users set on the
// leader are the same on every node and survive a restart; an application
// user gets NOPERM for membership changes; and an outsider without a
// certificate cannot get a forged Raft entry in.
func TestSecureClusterOfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	dir := t.TempDir()
	gen := exec.Command(sluicetest.Binary(t), "--cluster-gen-certs", dir, "--cluster-cert-hosts", "127.0.0.1 localhost")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("--cluster-gen-certs: %v\n%s", err, out)
	}
	secure := func(nodeDir string) []string {
		return []string{"--dir", nodeDir, "--requirepass", "adminpw", "--cluster-enabled", "yes", "--tls-cluster", "yes",
			"--tls-cert-file", filepath.Join(dir, "node.crt"), "--tls-key-file", filepath.Join(dir, "node.key"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.crt")}
	}
	ctx := context.Background()
	d1, d2, d3 := t.TempDir(), t.TempDir(), t.TempDir()
	addr1, _ := startBinary(t, append(secure(d1), "--cluster-bootstrap", "yes")...)
	addr2, _ := startBinary(t, append(secure(d2), "--cluster-join", addr1)...)
	addr3, cmd3 := startBinary(t, append(secure(d3), "--cluster-join", addr1)...)
	admin := redis.NewClient(&redis.Options{Addr: addr1, Password: "adminpw", Protocol: 2, MaxRetries: -1})
	defer admin.Close()
	waitNodes(t, admin, 3)

	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">apppw", "~app:*", "-@all", "+@limiter", "+client|setinfo").Err(); err != nil {
		t.Fatalf("ACL SETUSER on the leader: %v", err)
	}
	want := admin.Do(ctx, "ACL", "GETUSER", "app").Val()
	for _, addr := range []string{addr2, addr3} {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: "adminpw", Protocol: 2, MaxRetries: -1})
		sluicetest.WaitFor(t, 10*time.Second, "the user on "+addr, func() bool {
			got, err := c.Do(ctx, "ACL", "GETUSER", "app").Result()
			return err == nil && equalReplies(got, want)
		})
		c.Close()
	}

	app := redis.NewClient(&redis.Options{Addr: addr1, Username: "app", Password: "apppw", Protocol: 2, MaxRetries: -1})
	defer app.Close()
	if v, err := app.Do(ctx, "CL.THROTTLE", "app:login", "4", "1", "60").Slice(); err != nil || v[0] != int64(0) {
		t.Fatalf("the application's decision: %v %v", v, err)
	}
	for _, args := range [][]any{{"CLUSTER", "FORGET", "x"}, {"CLUSTER", "JOIN", "x", "127.0.0.1:1", "127.0.0.1:2"}, {"FLUSHALL"},
		{"CL.THROTTLE", "victim:login", "4", "1", "60"}} {
		if err := app.Do(ctx, args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%v as the application user: %v", args, err)
		}
	}

	// An outsider speaks Raft to a follower's port with raft's own plain
	// transport: an AppendEntries carrying a batch that would reset the
	// application's limiter. The handshake refuses it; nothing changes.
	raftAddr := raftAddrOf(t, admin, addr3)
	forgeAppendEntries(t, raftAddr)
	c3 := redis.NewClient(&redis.Options{Addr: addr3, Password: "adminpw", Protocol: 2, MaxRetries: -1})
	defer c3.Close()
	// Reads from the follower's own applied state.
	ro := c3.Conn()
	defer ro.Close()
	if err := ro.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n, err := ro.Do(ctx, "EXISTS", "forged:key").Int64(); err != nil || n != 0 {
		t.Fatalf("the forged entry reached a follower: %d %v", n, err)
	}
	if n, err := ro.Do(ctx, "EXISTS", "app:login").Int64(); err != nil || n != 1 {
		t.Fatalf("the follower does not hold the real decision: %d %v", n, err)
	}

	// The users survive a restart of a member (from its log and snapshot).
	cmd3.Process.Signal(syscall.SIGTERM)
	cmd3.Wait()
	// Back at its Raft address, where the group knows it.
	addr3, _ = startBinary(t, append(secure(d3), "--cluster-raft-addr", raftAddr)...)
	c3b := redis.NewClient(&redis.Options{Addr: addr3, Password: "adminpw", Protocol: 2, MaxRetries: -1})
	defer c3b.Close()
	sluicetest.WaitFor(t, 20*time.Second, "the user after a restart", func() bool {
		got, err := c3b.Do(ctx, "ACL", "GETUSER", "app").Result()
		return err == nil && equalReplies(got, want)
	})
}

func waitNodes(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	sluicetest.WaitFor(t, 30*time.Second, "the group to form", func() bool {
		info, _ := c.Do(context.Background(), "CLUSTER", "INFO").Text()
		return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+itoa(int64(n)))
	})
}

func equalReplies(a, b any) bool { return strings.Join(strs(a), "|") == strings.Join(strs(b), "|") }

// raftAddrOf reads a member's Raft address from CLUSTER NODES: the line
// whose client address is addr gives its node id, and ROLE/INFO do not
// carry Raft addresses, so it asks the node itself.
func raftAddrOf(t *testing.T, admin *redis.Client, addr string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: "adminpw", Protocol: 2, MaxRetries: -1})
	defer c.Close()
	v, err := c.Do(context.Background(), "CONFIG", "GET", "cluster-raft-addr").StringSlice()
	if err != nil || len(v) != 2 || v[1] == "" {
		t.Fatalf("CONFIG GET cluster-raft-addr on %s: %v %v", addr, v, err)
	}
	return v[1]
}

// forgeAppendEntries sends one AppendEntries RPC to a Raft port with raft's
// own unauthenticated TCP transport, carrying a batch entry that would SET
// forged:key. It must fail.
func forgeAppendEntries(t *testing.T, target string) {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	// A batch entry as the leader writes one (replication/entry.go):
	// kind 1 | now varint | origin u64 | seq uvarint | flags u8 | commands.
	entry := []byte{1}
	entry = binary.AppendVarint(entry, time.Now().UnixNano())
	entry = binary.LittleEndian.AppendUint64(entry, 42)
	entry = binary.AppendUvarint(entry, 1)
	entry = append(entry, 0)
	entry = engine.EncodeCommands(entry, []engine.Command{{Op: engine.OpSet, Key: []byte("forged:key"), Value: []byte("x")}})
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("outsider"), Addr: []byte(trans.LocalAddr())},
		Term:      1 << 20, Leader: []byte(trans.LocalAddr()), LeaderCommitIndex: 1 << 20,
		Entries: []*raft.Log{{Index: 1 << 20, Term: 1 << 20, Type: raft.LogCommand, Data: entry}},
	}
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries("victim", raft.ServerAddress(target), req, &resp); err == nil {
		t.Fatalf("an unauthenticated AppendEntries to %s succeeded: %+v", target, resp)
	}
}
