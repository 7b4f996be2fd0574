package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Clients that speak RESP3 by default connect without falling back and
// get RESP3's types: node-redis 6 and ioredis 6 at their defaults, go-redis
// v9 at its default (Protocol 3), and redis-cli -3. Decisions keep their
// five integers; LIMIT.INFO and CONFIG GET are maps.
func TestRESP3Clients(t *testing.T) {
	cli := sluicetest.Require(t, "redis-cli")
	addr, _ := startBinary(t, "--appendonly", "no")
	host, port, _ := strings.Cut(addr, ":")
	ctx := context.Background()

	// go-redis v9 at its defaults: HELLO 3, no RESP2 fallback round trip.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if info, err := rdb.Do(ctx, "CLIENT", "INFO").Text(); err != nil || !strings.Contains(info, " resp=3 ") {
		t.Fatalf("go-redis: CLIENT INFO %q %v", info, err)
	}
	if v, err := rdb.Do(ctx, "CL.THROTTLE", "go:k", "4", "1", "60").Slice(); err != nil || !reflect.DeepEqual(v, []any{int64(0), int64(5), int64(4), int64(-1), int64(60)}) {
		t.Fatalf("go-redis: CL.THROTTLE %v %v", v, err)
	}
	if v, err := rdb.Do(ctx, "LIMIT.INFO", "go:k").Result(); err != nil {
		t.Fatal(err)
	} else if m, ok := v.(map[any]any); !ok || m["family"] != "gcra" || m["remaining"] != int64(4) {
		t.Fatalf("go-redis: LIMIT.INFO is not a map: %#v", v)
	}
	if err := rdb.Get(ctx, "missing").Err(); err != redis.Nil {
		t.Fatalf("go-redis: GET of a missing key: %v", err)
	}

	// redis-cli -3.
	run := func(args ...string) string {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(c, cli, append([]string{"-3", "-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -3 %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run("CLIENT", "INFO"); !strings.Contains(out, " resp=3 ") {
		t.Fatalf("redis-cli -3: CLIENT INFO %q", out)
	}
	if out := run("--no-raw", "LIMIT.INFO", "go:k"); !strings.Contains(out, `1# "family" => "gcra"`) {
		t.Fatalf("redis-cli -3: LIMIT.INFO is not shown as a map:\n%s", out)
	}
	if out := run("--no-raw", "GET", "missing"); out != "(nil)" {
		t.Fatalf("redis-cli -3: GET of a missing key: %q", out)
	}

	node, ok := nodeClients(t)
	if !ok {
		return
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(c, node, "../../internal/clients/node/resp3.mjs", host, port).Output()
	if err != nil {
		t.Fatalf("node resp3.mjs: %v\n%s", err, out)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node resp3.mjs printed %q: %v", out, err)
	}
	for _, client := range []string{"ioredis", "node-redis"} {
		r := got[client]
		if r["resp"] != "3" {
			t.Errorf("%s negotiated RESP%v", client, r["resp"])
		}
		for cmd, want := range map[string]any{
			"PING": "PONG", "GET k": "v", "GET missing": nil, "INCR n": float64(1),
			"CL.THROTTLE " + client + " 4 1 60": []any{float64(0), float64(5), float64(4), float64(-1), float64(60)},
			"DEL k n":                           float64(2),
		} {
			if !reflect.DeepEqual(r[cmd], want) {
				t.Errorf("%s: %s = %#v, want %#v", client, cmd, r[cmd], want)
			}
		}
	}
	// Pub/sub on a second connection of each (RESP3 pushes): the channel's
	// message, then the pattern's, in order.
	for _, client := range []string{"ioredis", "node-redis"} {
		want := map[string]any{"counts": []any{float64(2), float64(1)}, "messages": []any{"news:n1", "news*|news:n1", "news*|newsroom:n2"}}
		if got := got[client]["pubsub"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s pub/sub: %#v, want %#v", client, got, want)
		}
	}
	// node-redis keeps RESP3 maps as objects (ioredis flattens them).
	if info, ok := got["node-redis"]["LIMIT.INFO node-redis"].(map[string]any); !ok || info["family"] != "gcra" || info["remaining"] != float64(4) {
		t.Errorf("node-redis: LIMIT.INFO %#v", got["node-redis"]["LIMIT.INFO node-redis"])
	}
	if cfg, ok := got["node-redis"]["CONFIG GET maxmemory-policy"].(map[string]any); !ok || cfg["maxmemory-policy"] != "noeviction" {
		t.Errorf("node-redis: CONFIG GET %#v", got["node-redis"]["CONFIG GET maxmemory-policy"])
	}
}

// redis-py's PubSub (Debian's python3-redis, RESP2): confirmations, then
// the channel's message and the pattern's, in order.
func TestRedisPyPubSub(t *testing.T) {
	py, ok := pythonRedis(t)
	if !ok {
		return
	}
	addr, _ := startBinary(t, "--appendonly", "no")
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "../../internal/clients/python/pubsub.py", host, port).CombinedOutput()
	want := `{"counts": [2, 1], "messages": [["subscribe", "news", 1], ["psubscribe", "news*", 2], ` +
		`["message", "", "news", "n1"], ["pmessage", "news*", "news", "n1"], ["pmessage", "news*", "newsroom", "n2"]], "numsub": [["news", 1]]}`
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("redis-py pub/sub: %v\n got %s\nwant %s", err, out, want)
	}
}
