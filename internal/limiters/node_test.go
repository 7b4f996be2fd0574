package limiters

import "testing"

// runNode runs a Node.js scenario (internal/clients/node/limiters) against
// Redis, then Sluice, and returns both transcripts, Redis's first; native
// as differential's.
func runNode(t *testing.T, native []string, script string, args ...string) (redisTr, sluiceTr []any) {
	t.Helper()
	node := nodeLimiters(t, "ioredis", "redis", "rate-limiter-flexible", "express", "express-rate-limit",
		"rate-limit-redis", "fastify", "@fastify/rate-limit", "bottleneck")
	return differential(t, native, func(e endpoint) []any {
		return runProgram(t, e, node, append([]string{"../clients/node/limiters/" + script, e.addr}, args...)...)
	})
}

// rate-limiter-flexible's RateLimiterRedis: a fixed window counter in one
// script (SET NX EX, INCRBY, PTTL, EXPIRE when the TTL is missing), MULTI
// for get, block and set, DEL for delete; over ioredis (EVALSHA, EVAL on
// NOSCRIPT) and node-redis (EVAL).
func TestRateLimiterFlexible(t *testing.T) {
	for _, client := range []string{"ioredis", "node-redis"} {
		t.Run(client, func(t *testing.T) {
			redisTr, sluiceTr := runNode(t, []string{"rlflex_incrttl"}, "flexible.mjs", client)
			noErrors(t, redisTr)
			expect(t, redisTr, map[string]any{
				"consume alice 1/remaining": 4, "consume alice 1/first": true, "consume alice 5/settled": "resolved",
				"consume alice 6/settled": "rejected", "consume alice 6/consumed": 6, "get alice/consumed": 6,
				"penalty alice 2/consumed": 8, "reward alice 4/consumed": 4, "stored alice/value": "4",
				"consume bob '3'/consumed": 5, "consume bob 1/settled": "rejected", "get nobody/res": nil,
				"block carol 30s/consumed": 6, "consume carol/consumed": 7, "consume carol/settled": "rejected",
				"stored carol/value": "7", "get dave/consumed": 3, "delete alice/res": true,
				"delete alice again/res": false, "get alice after delete/res": nil,
				"consume forever 3/settled": "rejected", "consume forever 3/before_next_ms": -1, "stored forever/ttl_s": -1,
				"consume blocking 3/before_next_ms": 120000, "stored blocking/value": "4",
				"consume alice after script flush/consumed": 1, "consume alice again/consumed": 2,
			})
			expectRange(t, redisTr, "stored carol/pttl_ms", 29000, 30000)
			expectRange(t, redisTr, "stored blocking/pttl_ms", 119000, 120000)
			compareTranscripts(t, redisTr, sluiceTr)
		})
	}
}

// express-rate-limit with rate-limit-redis over node-redis: an express app
// on 127.0.0.1:0 and plain HTTP requests, then the store's own calls.
// The store's scripts: PTTL, then SET PX for a new window or INCR; GET and
// PTTL to read.
func TestExpressRateLimit(t *testing.T) {
	redisTr, sluiceTr := runNode(t, []string{"rate_limit_redis_increment", "rate_limit_redis_get"}, "express.mjs")
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"GET alice 1/status": 200, "GET alice 1/remaining": 2, "GET alice 3/status": 200, "GET alice 3/remaining": 0,
		"GET alice 4/status": 429, "GET alice 5/status": 429, "GET bob/remaining": 2, "stored alice/value": "5",
		"getKey alice/total_hits": 5, "get alice after decrement/total_hits": 4,
		"get alice after reset/total_hits": "NaN", "get alice after reset/reset_in_ms": "past",
		"stored alice after reset/type": "none", "GET alice after reset/remaining": 2,
		"increment carol/total_hits": 1, "increment carol again/total_hits": 2,
		"increment dave (no TTL)/total_hits": 1, "stored dave/value": "1",
		"increment carol after script flush/total_hits": 3, "get carol after script flush/total_hits": 3,
		"logged/errors": []any{},
	})
	expectRange(t, redisTr, "GET alice 4/retry_after_s", 59, 60)
	expectRange(t, redisTr, "stored dave/pttl_ms", 59000, 60000)
	compareTranscripts(t, redisTr, sluiceTr)
}

// @fastify/rate-limit with its Redis store over ioredis (defineCommand:
// EVALSHA, EVAL on NOSCRIPT), through fastify.inject: the global limit,
// continueExceeding, exponentialBackoff (a float PEXPIRE argument), ban,
// and the store's read.
func TestFastifyRateLimit(t *testing.T) {
	redisTr, sluiceTr := runNode(t, []string{"fastify_incr", "fastify_read"}, "fastify.mjs")
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"status alice before/body": map[string]any{"remaining": 3, "exceeded": false, "ttl_ms": 0, "ttl_s": 0},
		"GET / alice 1/remaining":  2, "GET / alice 3/status": 200, "GET / alice 4/status": 429,
		"GET / alice 5/status": 429, "GET / bob/remaining": 2, "stored alice/value": "5",
		"GET /continue 3/status": 429, "stored continue/value": "4",
		"GET /backoff 1/status": 200, "GET /backoff 2/retry_after_s": 2, "GET /backoff 3/retry_after_s": 4,
		"GET /backoff 4/retry_after_s": 8, "GET /backoff 5/retry_after_s": 16, "stored backoff/value": "5",
		"GET /ban 2/status": 429, "GET /ban 3/status": 403, "GET /ban 4/status": 403,
		"GET / carol after script flush/remaining": 2,
	})
	expectRange(t, redisTr, "stored continue/pttl_ms", 29000, 30000)
	expectRange(t, redisTr, "stored backoff/pttl_ms", 15000, 16000)
	compareTranscripts(t, redisTr, sluiceTr)
}

// Bottleneck's clustering over ioredis: two limiters with one id share a
// reservoir and a concurrency limit through Bottleneck's scripts (hashes,
// sorted sets, TIME, PUBLISH from scripts), and hear of freed capacity and
// each other's messages over SUBSCRIBE on their second connections.
func TestBottleneck(t *testing.T) {
	redisTr, sluiceTr := runNode(t, nil, "bottleneck.mjs")
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"ready/a_reservoir": 3, "two running (maxConcurrent)/running": 2, "reservoir spent/ran": 3,
		"reservoir spent/reservoir": 0, "reservoir spent/queued": 2, "refilled from b/done": []any{1, 2, 3, 4, 5},
		"b waits/queued_b": 1, "b runs after a refills/result": "late", "message/got": "hello from a",
		"settings/b_reservoir": 10, "settings/done": 6,
		"channels/numsub": []any{"b_bn-test", 2}, "after disconnect/numsub": []any{"b_bn-test", 0},
	})
	compareTranscripts(t, redisTr, sluiceTr)
}
