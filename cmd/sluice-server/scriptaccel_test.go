package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestAcceleratedScriptsReplicateAndRestart: the known limiter scripts,
// run natively, leave the state the interpreter leaves, wherever that
// state is made again.
//
//   - A three-node group whose members differ in script-acceleration (the
//     leader and one follower native, one follower interpreted): each
//     member runs every script from the log itself, so every member's
//     state must be the same. The path travels in the entry (the leader
//     marks a known script's EVAL with its id), so the follower whose own
//     acceleration is off runs them natively too, and must say so.
//   - Beside it, two standalone servers with appendfsync always, one native
//     and one interpreted, sent the same commands: the same replies as the
//     group's and the same state.
//   - Every 50 steps, and at the end, all five states are compared.
//   - Then a follower is killed and comes back with acceleration off, and
//     replays its log (the run is far below Raft's snapshot threshold:
//     every entry is applied again); and the native
//     standalone server is killed and restarted from its journal. Both must
//     come back to the state they had.
//
// Every clock is frozen at one time and stepped alike (the group's leader
// stamps its entries with its own), so states compare exactly, TTLs too.
func TestAcceleratedScriptsReplicateAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five servers")
	}
	steps, seed, _ := difftest.Settings(600)
	debug := []string{"--enable-debug-command", "yes"}
	member := func(dir, accel string, more ...string) []string {
		return append(append([]string{"--dir", dir, "--cluster-enabled", "yes", "--script-acceleration", accel}, debug...), more...)
	}
	d3 := t.TempDir()
	addr1, _ := startBinary(t, member(t.TempDir(), "yes", "--cluster-bootstrap", "yes")...)
	addr2, _ := startBinary(t, member(t.TempDir(), "no", "--cluster-join", addr1)...)
	addr3, cmd3 := startBinary(t, member(d3, "yes", "--cluster-join", addr1)...)
	leader := sluicetest.DialRaw(t, "tcp", addr1)
	sluicetest.WaitFor(t, 30*time.Second, "three nodes in the group", func() bool {
		info := leader.Do(t, "CLUSTER", "INFO")
		return strings.Contains(info, "cluster_known_nodes:3") && strings.Contains(info, "cluster_state:ok")
	})
	dn := t.TempDir()
	standalone := func(dir, accel string) []string {
		return append([]string{"--dir", dir, "--appendfsync", "always", "--script-acceleration", accel}, debug...)
	}
	addrN, cmdN := startBinary(t, standalone(dn, "yes")...)
	addrI, _ := startBinary(t, standalone(t.TempDir(), "no")...)
	native, interp := sluicetest.DialRaw(t, "tcp", addrN), sluicetest.DialRaw(t, "tcp", addrI)

	// Every server's clock at the leader's, frozen.
	now := time.Now().UnixMilli() + 1000
	clocks := []string{addr1, addr2, addr3, addrN, addrI}
	setClocks := func() {
		for _, a := range clocks {
			if got := sluicetest.DialRaw(t, "tcp", a).Do(t, "DEBUG", "CLOCK", "SET", strconv.FormatInt(now, 10)); got != "+OK\r\n" {
				t.Fatalf("DEBUG CLOCK SET on %s: %q", a, got)
			}
		}
	}
	setClocks()

	r := rand.New(rand.NewPCG(seed, 23))
	scripts := difftest.AccelScripts
	bodies := make([]string, len(scripts))
	for i, s := range scripts {
		bodies[i] = difftest.AccelBody(t, s)
	}
	all := func(step int, args ...string) {
		want := interp.Do(t, args...)
		for name, c := range map[string]*sluicetest.RawConn{"the group's leader": leader, "the native server": native} {
			if got := c.Do(t, args...); got != want {
				t.Fatalf("step %d %.80q: %s %q, the interpreter %q", step, args, name, got, want)
			}
		}
	}
	var keys []string
	for _, s := range scripts {
		if s.Keys == "" { // scripts on another's keys add none
			keys = append(keys, s.Name+":0", s.Name+":1")
		}
	}
	native0 := scriptRunsNative(t, leader)
	for step := range steps {
		if step%50 == 49 {
			// The state as it goes (the end holds only each key's last
			// write).
			want := difftest.Dump(t, "tcp", addrI)
			for _, addr := range []string{addrN, addr1} {
				if got := difftest.Dump(t, "tcp", addr); !difftest.Same(got, want, 0) {
					difftest.Compare(t, fmt.Sprintf("step %d: %s", step, addr), got, want, 0)
					t.FailNow()
				}
			}
			for _, addr := range []string{addr2, addr3} {
				sluicetest.WaitFor(t, 10*time.Second, fmt.Sprintf("step %d: follower %s agrees", step, addr), func() bool {
					return difftest.Same(difftest.DumpReplica(t, addr), want, 0)
				})
			}
		}
		switch r.IntN(40) {
		case 0:
			key := keys[r.IntN(len(keys))]
			all(step, [][]string{{"DEL", key}, {"SET", key, difftest.PickR(r, "x", "0.5", "7")}, {"HSET", key, "f", "v"}}[r.IntN(3)]...)
			continue
		case 1:
			now += int64(r.IntN(2500))
			setClocks()
			continue
		}
		si := r.IntN(len(scripts))
		s := scripts[si]
		args := append([]string{"EVAL", bodies[si], "1", s.KeyPrefix() + ":" + strconv.Itoa(r.IntN(2))}, s.Args(r, false, now)...)
		all(step, args...)
	}
	if scriptRunsNative(t, leader) == native0 {
		t.Fatal("the leader ran no script natively")
	}
	if n := scriptRunsNative(t, sluicetest.DialRaw(t, "tcp", addr2)); n == 0 {
		t.Fatal("the follower with acceleration off ran no entry natively: the leader's path did not travel in the log")
	}

	want := difftest.Dump(t, "tcp", addrI)
	difftest.Compare(t, "the native server", difftest.Dump(t, "tcp", addrN), want, 0)
	difftest.Compare(t, "the group's leader", difftest.Dump(t, "tcp", addr1), want, 0)
	for _, addr := range []string{addr2, addr3} {
		sluicetest.WaitFor(t, 10*time.Second, "follower "+addr+" caught up", func() bool {
			return difftest.Same(difftest.DumpReplica(t, addr), want, 0)
		})
	}

	// A follower replays its log with its acceleration off.
	raftAddr := strings.Split(sluicetest.DialRaw(t, "tcp", addr3).Do(t, "CONFIG", "GET", "cluster-raft-addr"), "\r\n")[4]
	killHard(t, cmd3)
	addr3, _ = startBinary(t, member(d3, "no", "--cluster-raft-addr", raftAddr)...)
	clocks[2] = addr3
	setClocks()
	sluicetest.WaitFor(t, 20*time.Second, "the restarted follower caught up", func() bool {
		return difftest.Same(difftest.DumpReplica(t, addr3), want, 0)
	})

	// The native standalone server from its journal.
	killHard(t, cmdN)
	addrN, _ = startBinary(t, standalone(dn, "yes")...)
	clocks[3] = addrN
	setClocks()
	difftest.Compare(t, "the native server after kill -9", difftest.Dump(t, "tcp", addrN), want, 0)
	t.Logf("%d steps, seed %d, %d keys compared; the leader ran %d scripts natively", steps, seed, len(want), scriptRunsNative(t, leader)-native0)
}

// scriptRunsNative is INFO's script_runs_native.
func scriptRunsNative(t *testing.T, c *sluicetest.RawConn) int {
	t.Helper()
	_, rest, _ := strings.Cut(c.Do(t, "INFO", "scripting"), "script_runs_native:")
	n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\r\n", 2)[0]))
	if err != nil {
		t.Fatalf("INFO scripting: %v", err)
	}
	return n
}
