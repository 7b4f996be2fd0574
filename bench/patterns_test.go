package bench

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// The data-type recipes run without an error reply on both servers, count
// one request per operation, and leave the state they are meant to keep:
// logs of about logSize members, lists of listSize elements, hashes of two
// fields.
func TestPatternsRunOnBothServers(t *testing.T) {
	r, _ := startRedis(t)
	s := sluicetest.Start(t, sluicetest.Options{})
	targets := map[string]struct {
		target Target
		rdb    *redis.Client
	}{
		"redis":  {redisTarget(r), redis.NewClient(&redis.Options{Addr: r.Addr, Protocol: 2})},
		"sluice": {Target{Kind: KindSluice, Addr: s.Addr}, s.Client},
	}
	ctx := context.Background()
	const keys, n = 20, 6000
	for name, tg := range targets {
		for _, mode := range []string{"hash-bucket", "zset-log", "list-recent"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				res, err := Run(ctx, Config{Target: tg.target, Mode: mode, Requests: n, Conns: 4, Pipeline: 8, Keys: keys})
				if err != nil {
					t.Fatal(err)
				}
				if res.Requests != n || !res.OK() {
					t.Fatalf("requests %d, errors %d (%s), unanswered %d", res.Requests, res.Errors, res.FirstError, res.Unanswered)
				}
				key := "sluice-bench:" + mode + ":3"
				switch mode {
				case "hash-bucket":
					if got := tg.rdb.HLen(ctx, key).Val(); got != 2 {
						t.Errorf("HLEN %d", got)
					}
				case "zset-log":
					if got := tg.rdb.ZCard(ctx, key).Val(); got < logSize/2 || got > 2*logSize {
						t.Errorf("ZCARD %d, want about %d", got, logSize)
					}
				case "list-recent":
					if got := tg.rdb.LLen(ctx, key).Val(); got != listSize {
						t.Errorf("LLEN %d", got)
					}
				}
			})
		}
	}
}
