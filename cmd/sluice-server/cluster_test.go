package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestClusterWithRealClients starts three real sluice-server processes as
// one Raft group on loopback and talks to it the way users do: go-redis's
// ClusterClient seeded with a follower, plain clients that get MOVED, and
// redis-cli -c.
func TestClusterWithRealClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	ctx := context.Background()
	addrs, cmds := startGroup(t)
	addr1, addr2, addr3 := addrs[0], addrs[1], addrs[2]
	leader := client(addr1)
	defer leader.Close()

	// A follower answers a decision with MOVED to the leader.
	follower := client(addr3)
	defer follower.Close()
	err := follower.Do(ctx, "CL.THROTTLE", "user:1", 4, 1, 60).Err()
	slot := leader.Do(ctx, "CLUSTER", "KEYSLOT", "user:1").Val().(int64)
	if want := "MOVED " + itoa(slot) + " " + addr1; err == nil || err.Error() != want {
		t.Fatalf("decision on a follower: %v, want %q", err, want)
	}
	if role := follower.Do(ctx, "ROLE").Val().([]any); role[0] != "slave" {
		t.Fatalf("ROLE on a follower: %v", role)
	}

	// go-redis's ClusterClient, seeded with a follower only, finds the leader.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr2}, MaxRedirects: 3})
	defer cc.Close()
	for i := 0; i < 5; i++ {
		v, err := cc.Do(ctx, "CL.THROTTLE", "user:1", 4, 1, 60).Result()
		if err != nil {
			t.Fatalf("ClusterClient decision %d: %v", i, err)
		}
		if got := v.([]any)[2]; got != int64(4-i) {
			t.Fatalf("ClusterClient decision %d: remaining %v, want %d", i, got, 4-i)
		}
	}

	// A follower serves inspection from its applied state after READONLY.
	conn := follower.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := conn.Do(ctx, "LIMIT.INFO", "user:1").Result()
		if err == nil && strings.Contains(strings.Join(strs(v), " "), "remaining 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LIMIT.INFO on a READONLY follower: %v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// redis-cli -c follows the redirect from a follower.
	cli := sluicetest.Require(t, "redis-cli")
	host, port, _ := strings.Cut(addr2, ":")
	out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "CL.THROTTLE", "user:2", "4", "1", "60").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0\n5\n4\n-1\n60" {
		t.Fatalf("redis-cli -c via a follower: %v %q", err, out)
	}

	for _, c := range slices.Backward(cmds) {
		c.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("exit after SIGTERM: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("a node did not exit after SIGTERM")
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func strs(v any) []string {
	var out []string
	if list, ok := v.([]any); ok {
		for _, x := range list {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}
