// Package clientlib is the Go client applications use to make rate-limit
// decisions on a Sluice server. It owns the typed calls (GCRA, sliding
// window, sliding log, fixed window, refunds, resets, inspection and
// all-or-nothing multi-limit decisions) on top of any go-redis v9
// UniversalClient, the failure policy with its in-process fallback limiter
// and alarm, an optional over-limit cache, and net/http middleware. A
// Limiter is safe for concurrent use; so is the Middleware it backs.
//
// # Failure policy
//
// Each call has a short timeout (DefaultTimeout, 50 ms). When the server
// cannot be reached in time, or says it cannot serve (LOADING, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN), the Limiter's Policy answers instead, and the
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
// A decision is not idempotent: go-redis retries some failed commands, and a
// command whose write reached the server before the connection broke may
// then be charged twice. Give the Limiter a client with MaxRetries: -1 when
// that matters; the timeout already bounds how long a call can take.
//
// # Over-limit cache
//
// WithOverLimitCache remembers refusals until the server's retry time, so a
// client hammering a limited key costs no round trips. It only ever answers
// "limited", and only before the retry time the server gave (measured from
// when the request was sent), so it never admits what the server would have
// refused.
//
// # Middleware
//
// Middleware charges every Rule that applies to a request through All, sets
// the X-RateLimit-* and IETF RateLimit-Policy / RateLimit headers, and
// answers 429 with Retry-After when a rule refuses. It reserves then
// refunds: the cost is charged on arrival and given back after the response
// when the handler calls MarkFree or the status is in FreeStatuses. No
// status is free by default.
//
// # Argument reuse
//
// The arguments of single-limit decisions live in pooled buffers that are
// reused once the call returns. go-redis is done with them by then; a
// redis.Hook that keeps cmd.Args() beyond its ProcessHook call must copy
// them.
package clientlib
