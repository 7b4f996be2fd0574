// Package bench owns Sluice's load generator: the workloads (modes), the
// runner that drives them over raw RESP connections, the Lua scripts that
// make a real Redis the peer of each Sluice decision command, starters for
// redis-server and sluice-server processes, the loopback guard, and result
// formatting (table, JSON, CSV). cmd/sluice-bench only parses flags and
// wires these together.
//
// Concurrency: Run, Plan, CheckAddr and the Write* functions are safe to
// call from several goroutines; one Run uses one goroutine per connection
// and returns only after all of them have ended. A Server is safe for
// concurrent Close. The package holds no mutable state.
//
// # Measuring
//
// A run is one mode against one target (an address, a display name and a
// Kind). Each connection writes Pipeline requests in one write, then reads
// until all their replies are in, and repeats; the run ends after
// Config.Requests requests or Config.Duration (default 5s), whichever comes
// first, or when its context ends. Latency is per request: from the moment
// its batch was written to the moment the read that delivered its reply
// returned. With Config.Rate the run is open-loop: every connection sends on
// a fixed schedule and latency counts from the scheduled send time, so a
// stalled server shows in the percentiles instead of silently slowing the
// load (coordinated-omission correction, as wrk2 does). Percentiles come
// from HdrHistogram (1 ns to 1 h, 3 significant digits; about 270 KB per
// connection).
//
// The client path is lean so that it is never what is measured: requests
// are pre-encoded (redcon append helpers) into one reused buffer per
// connection, replies are parsed in place with redcon.ReadNextRESP from one
// reused read buffer, and a batch allocates nothing in steady state
// (TestWorkerBatchAllocatesNothing). Its own cost is about 0.1 us per PING
// and 0.3 us per CL.THROTTLE (BenchmarkWorkerBatch); the rest is the
// kernel's, about 1 us per request at pipeline 16 on a 2-core VM, the same
// as redis-benchmark on the same machine.
//
// # Modes
//
// Each mode belongs to a family; Plan runs a family on each target in that
// server's own terms, so one invocation compares peers side by side.
//
//	family          Sluice                           Redis
//	ping            PING                             PING
//	incr            INCR key                         INCR key
//	gcra            CL.THROTTLE key burst count period cost
//	                                                 lua-gcra (scripts/gcra.lua)
//	sliding-window  SW.CHECK key limit window cost   lua-sw   (scripts/sw.lua)
//	fixed-window    FW.CHECK key limit window cost   lua-fw   (scripts/fw.lua)
//	sliding-log     SL.CHECK key limit window cost   (no peer; skipped on Redis)
//	leaky-bucket    LB.RESERVE key rate period burst cost
//	                                                 (no peer; skipped on Redis)
//	concurrency     CONC.ACQUIRE key 20 30 ID n, then CONC.RELEASE key n
//	                (one operation)                  (no peer; skipped on Redis)
//	limit-all       LIMIT.ALL 3 CL.THROTTLE key ... SW.CHECK key:sw ...
//	                FW.CHECK key:fw ...              (no peer; skipped on Redis)
//
// The Lua scripts are loaded once per run with SCRIPT LOAD and called with
// EVALSHA; each answers the same 5-field array as Sluice
// ({limited, limit, remaining, retry_after, reset_after}, times in ms), and
// a reply whose first element is 1 counts as limited. The GCRA script
// follows go-redis/redis_rate (TIME inside the script, effects replicated)
// with redis-cell's arguments, so it admits burst+1 at once, like
// CL.THROTTLE. The sliding window script keeps two counter keys named after
// the window index. The fixed window script is the classic INCRBY plus
// PEXPIRE (its window starts at a key's first hit, and limited requests
// still count).
//
// Library modes send, on both servers alike, the script a real limiter
// library sends, byte for byte as it sends it (its text, command spelling,
// key prefix, arguments, and what it does on NOSCRIPT), so that Sluice is
// measured with unmodified clients' traffic:
//
//	redis-rate        go-redis/redis_rate v10.0.1 allowN (GCRA), as
//	                  Allow(ctx, key, PerSecond(limit)) sends it:
//	                  evalsha SHA 1 rate:KEY burst rate period cost
//	                  (burst defaults to the limit, as PerSecond's does);
//	                  on NOSCRIPT the same call as eval (go-redis Script.Run).
//	                  Reply {allowed, remaining, retry_after, reset_after}:
//	                  allowed 0 is refused.
//	redis-rate-atmost redis_rate's allowAtMost, as AllowAtMost(ctx, key,
//	                  PerSecond(limit), cost) sends it: the same arguments
//	                  and NOSCRIPT handling as redis-rate. Allowed is what
//	                  was granted, up to the cost; 0 is refused.
//	rlflex            rate-limiter-flexible 11.4.0 RateLimiterRedis.consume
//	                  over ioredis: eval on a connection's first call, then
//	                  evalsha SHA 1 rlflx:KEY cost floor(period) limit period;
//	                  on NOSCRIPT eval again. Reply {consumed, ttl_ms}:
//	                  consumed > limit is refused. Periods under 1 s are
//	                  refused (the library sends no script for them).
//	rate-limit-redis  rate-limit-redis 6.0.1 (express-rate-limit's store):
//	                  SCRIPT LOAD of its two scripts at the start, then
//	                  EVALSHA SHA 1 rl:KEY windowMs; on NOSCRIPT SCRIPT LOAD
//	                  and EVALSHA again. Reply {totalHits, ttl_ms}:
//	                  totalHits > limit is refused. Cost must be 1.
//	ulule             ulule/limiter v3.11.2's redis store (go-redis), as
//	                  Increment(ctx, key, cost, rate) sends it: script load
//	                  of its incr and peek scripts at the start, then
//	                  evalsha SHA 1 limiter:KEY cost period_ms; on NOSCRIPT
//	                  script load of both again and evalsha again. Reply
//	                  {count, ttl_ms}: count > limit is refused. The period
//	                  must be whole milliseconds.
//	fastify           @fastify/rate-limit 11.2.0's RedisStore over ioredis:
//	                  eval on a connection's first call, then
//	                  evalsha SHA 1 fastify-rate-limit-KEY timeWindow_ms
//	                  limit false false (continueExceeding and
//	                  exponentialBackoff off, the defaults); on NOSCRIPT eval
//	                  again. Reply {current, ttl_ms}: current > limit is
//	                  refused. Whole milliseconds, cost 1.
//	limits-fixed      Python limits 2.8.0 FixedWindowRateLimiter.hit over
//	                  redis-py 4.3.4 (register_script):
//	                  EVALSHA SHA 1 LIMITER/KEY/limit/multiples/granularity
//	                  expiry_s cost, the key as RateLimitItem.key_for makes
//	                  it (3600 s is "1/hour", 90 s "90/second"); on NOSCRIPT
//	                  SCRIPT LOAD and EVALSHA again, and nothing loaded
//	                  before. Reply: the count; count > limit is refused.
//	                  The period must be whole seconds.
//	limits-moving     limits' MovingWindowRateLimiter.hit, sent as
//	                  limits-fixed is: EVALSHA SHA 1 LIMITER/KEY/... time
//	                  limit expiry_s cost, time being time.time() as
//	                  redis-py writes a float (repr, e.g. 1796140899.2078428),
//	                  taken once per batch. Reply 1 (true) is allowed, nil
//	                  (false) refused.
//
// The scripts are under scripts/ (a comment header naming their source,
// then the exact text); testdata/libcapture holds what redis_rate,
// rate-limiter-flexible and rate-limit-redis wrote on the wire, which a
// test compares with what these modes write (the other libraries' texts
// are proved by internal/limiters, which runs the installed libraries). Every
// reply is counted by its decision field; the first reply of each
// connection and one in 32 after it have their whole shape checked, and a
// reply of the wrong shape counts as an error. Result.ScriptFallbacks
// counts the NOSCRIPT replies the fallback answered.
//
// Limit parameters (Config.Limit; flags --limit --period --burst --cost)
// default to 100 per 1 s with burst 99 and cost 1, that is
// CL.THROTTLE key 99 100 1 1. Spread over the default 10000 keys, a run at
// a few hundred thousand requests per second asks each key for a few dozen
// per second, so nearly every decision is allowed; --hot 0.1 (a tenth of
// the traffic on one key) or a small --keys gives a mix of allowed and
// limited.
//
// Server CPU: when a target carries the server's pid (Target.Pid; the
// command sets it for the servers it starts), Run reads that process's CPU
// time (user + system over all its threads, from the kernel's per-process
// CPU clock, in ns; /proc/<pid>/stat is the fallback) just before the load
// starts and just after the last reply, and reports the server's CPU per
// request (Result.ServerCPUPerOp, in us) and its utilisation in cores. On a
// 2-core machine the generator on one core can barely out-run a server on
// the other, so throughput ratios are capped by the client; CPU per
// decision is the figure that compares servers, and the table prints a
// line per family such as
//
//	gcra: redis lua-gcra uses 7.54 us/decision, sluice cl.throttle 1.30 us (5.8x less)
//
// Errors: a target that cannot be dialled, a lost connection, a timeout
// (Config.Timeout, default 5s, per write and per reply) or a protocol error
// ends the run with an error and a partial Result. Error replies (for
// example a command the server does not have) are counted in Result.Errors
// with the first message kept; they do not stop the run.
//
// Safety: load goes only to loopback (127.0.0.0/8, ::1, localhost), checked
// by CheckAddr before any connection, unless Config.AllowRemote is set.
// Every run is bounded by count or time. Servers started by StartRedis or
// StartSluice get SIGTERM on Close, and from the kernel if this process
// dies first.
//
// # The command
//
//	sluice-bench [flags]
//
//	targets   --start-redis [--redis-server PATH] [--redis-cpu N]
//	          --redis-addr HOST:PORT
//	          --start-sluice PATH [--sluice-args "..."] [--sluice-cpu N]
//	          --sluice-addr HOST:PORT
//	          -h HOST -p PORT   a target whose modes run exactly as named
//	                            (the default, 127.0.0.1:6379, when no other
//	                            target is given)
//	          --allow-remote    permit non-loopback targets
//	load      -t MODES          modes or families, comma-separated (default gcra)
//	          -c N              connections (default 50)
//	          -P N              pipeline depth (default 1)
//	          -n N | -d DUR     requests or duration per run (default -d 5s)
//	          --rate R          open loop at R requests/s in total
//	          --keys N          distinct keys (default 10000)
//	          --hot F           fraction of requests on one hot key
//	          --seed S          key-choice seed (default from the clock, printed)
//	          --key-prefix P    default "sluice-bench:<mode>:"
//	          --limit L --period S --burst B --cost C
//	          --timeout DUR     dial and per-reply timeout (default 5s)
//	          --cpu N           pin the generator to CPU N
//	output    --json FILE --csv FILE, -q (no progress bar)
//
// --cpu pins by setting the calling thread's affinity and re-executing the
// binary (see PinSelf), so every runtime thread inherits the one-CPU mask
// and GOMAXPROCS becomes 1; servers are pinned with taskset. The table goes
// to stdout; notes, the seed and a progress bar (on a terminal, for runs
// over 2s) go to stderr. The exit status is 0 when every run completed
// without error replies, 1 when any run failed or saw errors, 2 for usage
// errors and refused targets, 3 when a server could not be started.
//
// Example, Sluice against Redis on a 2-core machine, each server on core 0
// in turn and the generator on core 1:
//
//	sluice-bench --start-sluice ./sluice-server --sluice-cpu 0 \
//	    --start-redis --redis-cpu 0 --cpu 1 -t gcra,incr -c 50 -P 16 -d 5s
//
// # Experiments
//
// RunExperiment reproduces the published measurements of EXPERIMENTS.md,
// each against a real redis-server running the usual scripts and against
// Sluice, on servers it starts itself (Sluice with its debug clock, so that
// requests can be placed at exact instants):
//
//	boundary      fixed window vs sliding counter vs sliding log vs GCRA at a
//	              window boundary, and under a uniform stream
//	reset-race    the two-command reset race vs one Lua script vs FW.CHECK
//	reset-header  the reset a response reports: now + TTL vs a stored reset
//	replica-lag   deciding off a replica behind a delaying loopback proxy
//	              (Redis primary + replica; a three-node Sluice group whose
//	              follower's Raft link is delayed)
//	eviction      allkeys-lru evicting limiters vs Sluice's -OOM
//	shards        Sluice --shards 1/2/4/8 vs one or two Redis servers (keys
//	              split by CRC32), uniform keys and one hot key
//
// Each returns an ExperimentReport: a CSV with every number, gonum/plot
// charts and a markdown section, written by WriteExperiment. Smoke mode
// (ExperimentConfig.Smoke) bounds each to a few seconds; TestExperimentsSmoke
// runs them all and checks the headline facts.
//
//	sluice-bench experiment NAME...|all [--out DIR] [--smoke]
//	    [--start-sluice PATH] [--sluice-args "..."] [--redis-server PATH]
//	    [--server-cpu N] [--cpu N] [--seed S] [-q]
package bench
