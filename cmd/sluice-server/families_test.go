package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestShapingAndConcurrencyReplicateAndRestart: the leaky bucket's and the
// concurrency family's state is the same on every node of a three-node
// group, and on a standalone server after kill -9 and a restart from its
// journal. Every clock is frozen at one time and stepped alike, so each
// key's LIMIT.INFO must match byte for byte.
func TestShapingAndConcurrencyReplicateAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers")
	}
	debug := []string{"--enable-debug-command", "yes"}
	node := func(more ...string) []string {
		return append(append([]string{"--dir", t.TempDir(), "--cluster-enabled", "yes"}, debug...), more...)
	}
	addr1, _ := startBinary(t, node("--cluster-bootstrap", "yes")...)
	addr2, _ := startBinary(t, node("--cluster-join", addr1)...)
	addr3, _ := startBinary(t, node("--cluster-join", addr1)...)
	leader := sluicetest.DialRaw(t, "tcp", addr1)
	sluicetest.WaitFor(t, 30*time.Second, "three nodes in the group", func() bool {
		info := leader.Do(t, "CLUSTER", "INFO")
		return strings.Contains(info, "cluster_known_nodes:3") && strings.Contains(info, "cluster_state:ok")
	})
	dir := t.TempDir()
	standalone := append([]string{"--dir", dir, "--appendfsync", "always"}, debug...)
	addrS, cmdS := startBinary(t, standalone...)
	single := sluicetest.DialRaw(t, "tcp", addrS)

	now := time.Now().UnixMilli() + 1000
	clocks := []string{addr1, addr2, addr3, addrS}
	setClocks := func() {
		for _, a := range clocks {
			if got := sluicetest.DialRaw(t, "tcp", a).Do(t, "DEBUG", "CLOCK", "SET", strconv.FormatInt(now, 10)); got != "+OK\r\n" {
				t.Fatalf("DEBUG CLOCK SET on %s: %q", a, got)
			}
		}
	}
	setClocks()
	r := rand.New(rand.NewPCG(7, 19))
	var keys []string
	for i := range 4 {
		// One hash tag for each pair, so that LIMIT.ALL may take both.
		keys = append(keys, fmt.Sprintf("lb:{%d}", i), fmt.Sprintf("conc:{%d}", i))
	}
	var allAdmitted, allRefused int
	for step := range 400 {
		var args []string
		switch k := keys[r.IntN(len(keys))]; {
		case r.IntN(20) == 0:
			now += int64(r.IntN(300))
			setClocks()
			continue
		case r.IntN(8) == 0:
			// A place on a schedule and a lease, all or nothing.
			tag := k[strings.IndexByte(k, '{'):]
			args = []string{"LIMIT.ALL", "2", "LB.RESERVE", "lb:" + tag, "10", "1", "1", "1", "MAXWAIT", strconv.Itoa(r.IntN(300)), "MS",
				"CONC.ACQUIRE", "conc:" + tag, strconv.Itoa(1 + r.IntN(3)), "0.8", "ID", "h" + strconv.Itoa(r.IntN(6))}
		case strings.HasPrefix(k, "lb:") && r.IntN(5) == 0:
			args = []string{"LB.CANCEL", k, strconv.Itoa(r.IntN(3))}
		case strings.HasPrefix(k, "lb:"):
			args = []string{"LB.RESERVE", k, strconv.Itoa(5 + r.IntN(20)), "1", strconv.Itoa(1 + r.IntN(3)), strconv.Itoa(r.IntN(3)), "MAXWAIT", strconv.Itoa(r.IntN(600)), "MS"}
		default:
			id := "h" + strconv.Itoa(r.IntN(6))
			switch r.IntN(4) {
			case 0:
				args = []string{"CONC.RELEASE", k, id}
			case 1:
				args = []string{"CONC.RENEW", k, id, "0.5"}
			case 2:
				args = []string{"CONC.ACQUIRE", k, "3", "1"} // an id the server makes
			default:
				args = []string{"CONC.ACQUIRE", k, strconv.Itoa(1 + r.IntN(4)), "0.8", "ID", id}
			}
		}
		want := single.Do(t, args...)
		if got := leader.Do(t, args...); got != want {
			t.Fatalf("step %d %q: the leader %q, the standalone server %q", step, args, got, want)
		}
		if args[0] == "LIMIT.ALL" {
			if strings.HasPrefix(want, "*3\r\n:0\r\n") {
				allAdmitted++
			} else {
				allRefused++
			}
		}
	}
	if allAdmitted == 0 || allRefused == 0 {
		t.Fatalf("LIMIT.ALL admitted %d and refused %d: the run proves too little", allAdmitted, allRefused)
	}
	infos := func(addr string, readonly bool) string {
		c := sluicetest.DialRaw(t, "tcp", addr)
		if readonly {
			c.Do(t, "READONLY")
		}
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k + " " + c.Do(t, "LIMIT.INFO", k))
		}
		return b.String()
	}
	want := infos(addrS, false)
	if !strings.Contains(want, "leaky-bucket") || !strings.Contains(want, "concurrency") {
		t.Fatalf("the run left no schedule or no lease: %q", want)
	}
	if got := infos(addr1, false); got != want {
		t.Fatalf("the leader:\n%q\nthe standalone server:\n%q", got, want)
	}
	for _, a := range []string{addr2, addr3} {
		sluicetest.WaitFor(t, 10*time.Second, "follower "+a+" agrees", func() bool { return infos(a, true) == want })
	}
	killHard(t, cmdS)
	addrS, _ = startBinary(t, append([]string{"--dir", dir, "--appendfsync", "always"}, debug...)...)
	clocks[3] = addrS
	setClocks()
	if got := infos(addrS, false); got != want {
		t.Fatalf("after kill -9 and a restart:\n%q\nbefore:\n%q", got, want)
	}
}
