package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestDataTypesSurviveKill9 sends the differential sequence (every data
// type and transactions) to a sluice-server running with appendfsync
// always and to redis-server, with a snapshot taken part way, then kills
// Sluice with SIGKILL, restarts it from its directory, and compares its
// whole state with Redis's: the snapshot carries every type and the log
// tail replays to the same state.
func TestDataTypesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary twice")
	}
	steps, seed, families := difftest.Settings(2000)
	dir := t.TempDir()
	addr, cmd := startBinary(t, "--dir", dir, "--appendfsync", "always")
	r := sluicetest.StartRedis(t, "--databases", "1")
	p := difftest.NewPair(t, addr, r)
	p.ReplyLagMS = 1000 // a write is answered after its fsync
	g := difftest.NewGen(seed)
	p.Run(g, steps/2, families...)
	if got := p.Sluice.Do(t, "SAVE"); got != "+OK\r\n" {
		t.Fatalf("SAVE: %q", got)
	}
	p.Run(g, steps-steps/2, families...)
	want := difftest.Dump(t, r.Network, r.Addr)
	difftest.Compare(t, "before the kill", difftest.Dump(t, "tcp", addr), want, 1)
	killHard(t, cmd)

	addr, cmd = startBinary(t, "--dir", dir, "--appendfsync", "always")
	defer killHard(t, cmd)
	difftest.Compare(t, "after kill -9 and restart", difftest.Dump(t, "tcp", addr), want, 2)
	t.Log(p.CountsLine())
}

// TestDataTypesReplicateToEveryNode sends the differential sequence
// through the leader of a three-node group (and to redis-server), then
// compares every node's state, the followers' read after READONLY, with
// Redis's.
func TestDataTypesReplicateToEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	steps, seed, families := difftest.Settings(1500)
	addr1, _ := startBinary(t, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-bootstrap", "yes")
	addr2, _ := startBinary(t, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-join", addr1)
	addr3, _ := startBinary(t, "--dir", t.TempDir(), "--cluster-enabled", "yes", "--cluster-join", addr2)
	leader := sluicetest.DialRaw(t, "tcp", addr1)
	sluicetest.WaitFor(t, 30*time.Second, "three nodes in the group", func() bool {
		info := leader.Do(t, "CLUSTER", "INFO")
		return strings.Contains(info, "cluster_known_nodes:3") && strings.Contains(info, "cluster_state:ok")
	})
	r := sluicetest.StartRedis(t, "--databases", "1")
	p := difftest.NewPair(t, addr1, r)
	p.ReplyLagMS = 1000 // a Raft commit, under -race on a busy machine
	g := difftest.NewGen(seed)
	g.FingerprintWatch = true
	g.Replicated = true
	p.Run(g, steps, families...)
	// A script's random numbers start from the seed on every node: a
	// write of one lands alike everywhere, and is what Redis's first
	// script draws.
	const draw = "return redis.call('set', KEYS[1], tostring(math.random(2, 1000000)))"
	for _, c := range []*sluicetest.RawConn{leader, p.Redis} {
		if got := c.Do(t, "EVAL", draw, "1", "drawn"); got != "+OK\r\n" {
			t.Fatalf("EVAL: %q", got)
		}
	}
	fresh := sluicetest.StartRedis(t)
	first := sluicetest.DialRaw(t, fresh.Network, fresh.Addr).Do(t, "EVAL", "return tostring(math.random(2, 1000000))", "0")
	p.Redis.Do(t, "SET", "drawn", strings.Split(first, "\r\n")[1])
	want := difftest.Dump(t, r.Network, r.Addr)
	difftest.Compare(t, "leader", difftest.Dump(t, "tcp", addr1), want, 1)
	for _, addr := range []string{addr2, addr3} {
		// A follower may apply the last entries a moment after the
		// leader answered.
		sluicetest.WaitFor(t, 10*time.Second, "follower "+addr+" caught up", func() bool {
			return difftest.Same(difftest.DumpReplica(t, addr), want, 1)
		})
		difftest.Compare(t, "follower "+addr, difftest.DumpReplica(t, addr), want, 1)
	}
	t.Log(p.CountsLine())
}
