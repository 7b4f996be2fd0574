// Package clientlib is the Go client applications use to make rate-limit
// decisions on a Sluice server. It owns the typed calls (GCRA, sliding
// window, sliding log, fixed window, refunds, resets, inspection,
// all-or-nothing multi-limit decisions, shaping and concurrency leases) on
// top of any go-redis v9 UniversalClient, the failure policy with its
// in-process fallback limiter and alarm, an optional over-limit cache, and
// net/http middleware. A Limiter is safe for concurrent use; so is the
// Middleware it backs.
//
// # Failure policy
//
// Each call has a short timeout (DefaultTimeout, 50 ms). When the server
// cannot be reached in time, or says it cannot serve (LOADING, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN, a cluster's "outcome unknown", or a MOVED, ASK
// or READONLY left over when a cluster client ran out of redirects), the
// Limiter's Policy answers instead, and the
// Result says so in Source and Err:
//
//   - FailClosed for abuse-facing limits (login, signup, password reset):
//     an outage must not become a window for brute force or sign-up spam.
//   - FailOpen for paid quota: refusing paying customers because the
//     limiter is down costs more than a short overshoot.
//   - FailFallback (the default) in between: an in-process limiter of the
//     same shape decides. It sees only this process's traffic, so N
//     processes admit up to N times the limit unless WithFallbackShare
//     divides it; and it holds a bounded number of keys.
//   - FailError returns the error to the caller.
//
// Use one Limiter per policy; they can share one go-redis client. Error
// replies about the arguments (ERR ..., WRONGTYPE) are always returned as
// errors, never masked, and so is the caller's own context being done.
// WithAlarm's hook fires once when the policy starts answering and once
// when the server answers again; Stats counts the episodes and answers.
//
// # The go-redis client
//
// Build the Limiter's client with ContextTimeoutEnabled: true. go-redis
// otherwise ignores context deadlines and waits out its own ReadTimeout
// (5 s); the Limiter then still enforces its timeout, but by running each
// call on a helper goroutine, which costs a goroutine hand-off per call
// (tens of microseconds on a small VM) and leaves the abandoned command to
// finish, and possibly be charged, in the background.
//
// # Request ids: charged once, whatever is retried
//
// Every decision (AllowN with a positive cost, All) and every Refund
// carries a request id (REQID). The server remembers each id's reply per key for its
// reqid-window (10 s by default) and answers a retry with it, charging
// nothing again. So go-redis's own retries of a command whose connection
// broke, and the Limiter's one retry after a lost answer (a timeout, a
// dropped connection, a cluster's "outcome unknown"; made only while the
// server was answering, so a call takes at most twice the timeout) charge
// once. A caller that retries a request itself passes one id for all its
// attempts with WithRequestID. With a ClusterClient, every failure also
// asks go-redis to reload its slot map, so a killed leader's replacement
// is found within about a second of its election instead of at the next
// periodic reload.
//
// # Shaping
//
// Wait reserves a unit of a key's smooth schedule (LB.RESERVE) and sleeps
// until its slot, like golang.org/x/time/rate's Wait but shared by every
// process that uses the key: workers calling a third-party API that allows
// N a second together go no faster and leave no slot unused. A slot past
// the context's deadline is not reserved (ErrWaitTooLong), and a context
// that ends while waiting cancels the reservation (LB.CANCEL), so callers
// behind it go sooner. Reserve and Cancel are the two halves for callers
// that schedule their own work.
//
// # Concurrency limits: leases
//
// Acquire takes one of max concurrent leases on a key (CONC.ACQUIRE) for a
// lease time; Release gives it back and Renew extends it. A lease ends on
// its own when its time is up, so a holder that crashes, hangs or loses
// its connection frees its slot then, exactly, without anyone releasing
// it: choose the lease as the longest the guarded work may take, and Renew
// work that runs longer (a Renew that reports false means the slot may
// already be someone else's). Release needs no context, so a deferred
// Release runs even after the request's context is done; it waits at most
// the Limiter's timeout, and calling it twice sends one CONC.RELEASE.
//
// Each acquisition carries its own lease id (the context's WithRequestID
// id, or a fresh one), and acquiring again with an id that holds a lease
// renews it, so an acquisition whose answer was lost is sent once more, as
// a decision is, and takes one slot. When the server cannot be asked, the
// failure policy answers as it does for decisions: FailOpen grants,
// FailClosed refuses, FailError returns the error, and FailFallback holds
// this process's own leases to max (divided by WithFallbackShare) per key.
// A lease granted by a policy after a lost answer may also be held on the
// server; Release gives that back once the server answers again, and
// otherwise it ends with its lease.
//
// # Over-limit cache
//
// WithOverLimitCache remembers refusals until the server's retry time, so a
// client hammering a limited key costs no round trips. It only ever answers
// "limited", and only before the retry time the server gave (measured from
// when the request was sent), so it never admits what the server would have
// refused.
//
// # Metrics
//
// Collector exports a Limiter's counters to Prometheus under a limiter
// label: decisions by who answered them (server, fallback, fail_open,
// fail_closed), fallback episodes, a 0/1 gauge that is 1 while the policy
// answers, over-limit cache hits and server errors. An application on its
// fallback enforces only approximate, per-process limits, so alert on
// sluice_client_fallback_active (docs/alerts.yml does). Each decision pays
// one atomic add for them; the rest is read when scraped.
//
// # Middleware
//
// Middleware charges every Rule that applies to a request through All, sets
// the X-RateLimit-* and IETF RateLimit-Policy / RateLimit headers, and
// answers 429 with Retry-After when a rule refuses. It reserves then
// refunds: the cost is charged on arrival and given back after the response
// when the handler calls MarkFree or the status is in FreeStatuses. No
// status is free by default. Concurrent rules (ConcurrencyRule) bound the
// requests in flight per key: a lease is taken once the rate rules admit
// the request and given back when the handler returns, panics included; a
// request refused by one gets 429 with Retry-After, and its rate charge is
// refunded. Shape rules (ShapeRule) make requests wait their turn on a
// smooth schedule before the handler runs, up to a MaxWait past which they
// are refused the same way.
//
// # Argument reuse
//
// The arguments of single-limit decisions live in pooled buffers that are
// reused once the call returns. go-redis is done with them by then; a
// redis.Hook that keeps cmd.Args() beyond its ProcessHook call must copy
// them.
package clientlib
