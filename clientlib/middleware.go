package clientlib

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// KeyFunc says whom a request counts against. An empty key means the rule
// does not apply to the request.
type KeyFunc func(r *http.Request) string

// Rule is one limit the middleware applies to each request.
type Rule struct {
	// Name names the policy in the RateLimit-Policy and RateLimit headers
	// and namespaces the server key, which is Name + ":" + key. Printable
	// ASCII; must be unique among the rules.
	Name  string
	Limit Limit
	// Key identifies the client for this rule; nil uses
	// MiddlewareOptions.Key.
	Key KeyFunc
}

// ConcurrencyRule bounds the requests in flight (CONC.ACQUIRE): at most Max
// at once per key, each holding its lease until the handler returns
// (panics included) or, if this process dies, until Lease ends.
type ConcurrencyRule struct {
	// Name namespaces the server key (Name + ":" + key), as Rule's does.
	Name  string
	Max   int
	Lease time.Duration
	// Key identifies the client; nil uses MiddlewareOptions.Key.
	Key KeyFunc
}

// ShapeRule makes requests wait their turn on a smooth schedule
// (LB.RESERVE) instead of being refused: each request reserves a slot and
// waits for it before the handler runs, unless the wait would pass MaxWait,
// when it is refused with Retry-After (nothing reserved).
type ShapeRule struct {
	// Name namespaces the server key (Name + ":" + key), as Rule's does.
	Name     string
	Schedule Schedule
	MaxWait  time.Duration
	// Key identifies the client; nil uses MiddlewareOptions.Key.
	Key KeyFunc
}

// MiddlewareOptions configures Middleware.
type MiddlewareOptions struct {
	// Rules are charged together through All: a request passes only if
	// every rule that applies to it admits it, and then all are charged.
	Rules []Rule
	// Concurrent are in-flight limits, taken after Rules admit the
	// request and given back when the handler returns. A request refused
	// by one is answered as a refused rule is (OnLimited, with Retry-After
	// the time until the key's earliest lease ends), and what Rules
	// charged for it is refunded.
	Concurrent []ConcurrencyRule
	// Shape are schedules a request waits its turn on, after Rules admit
	// it and before it takes its Concurrent leases (a request waiting for
	// its slot holds none). A wait past a rule's MaxWait is refused as a
	// refused rule is, and what Rules charged is refunded.
	Shape []ShapeRule
	// Key is the default KeyFunc. Default: the client IP, with
	// X-Forwarded-For believed only from TrustedProxies (see ClientIP).
	Key KeyFunc
	// TrustedProxies are the networks whose X-Forwarded-For the default
	// Key believes. Default none: the direct peer is the client.
	TrustedProxies []netip.Prefix
	// Cost is what a request charges on every rule. Default 1.
	Cost func(r *http.Request) int64
	// FreeStatuses are response statuses whose cost is refunded after the
	// response (reserve-then-refund). Default none: every admitted request
	// counts, including 304s; add http.StatusNotModified to make
	// revalidations free. A handler can also make its request free with
	// MarkFree.
	FreeStatuses []int
	// OnLimited writes the response to a refused request; the rate-limit
	// headers and Retry-After are already set. Default: 429 with a short
	// text body.
	OnLimited func(w http.ResponseWriter, r *http.Request, res AllResult)
	// OnError writes the response when the limiter returns an error (an
	// invalid limit, a cancelled request, or FailError with the server
	// down). Default: 500.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

type freeKey struct{}

// requestState is what MarkFree reaches through the request context.
type requestState struct{ free bool }

// MarkFree makes the current request free: after the response, the
// middleware refunds its cost on every limit it charged. Call it from the
// handler, e.g. for requests rejected by validation before doing any work.
// It reports false when the request did not pass through the middleware.
func MarkFree(r *http.Request) bool {
	st, ok := r.Context().Value(freeKey{}).(*requestState)
	if ok {
		st.free = true
	}
	return ok
}

// Middleware limits requests with l. On every response it sets
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds
// until reset) from the most restrictive rule (the one that refused, else
// the fewest remaining), and the IETF RateLimit-Policy and RateLimit fields
// for every rule, in structured-field syntax. A refused request gets 429
// with Retry-After (seconds, rounded up).
//
// The headers are written before the handler runs, so a request that is
// refunded afterwards still shows its reservation. When a rule refuses, the
// other rules show what their state would have been had the request been
// charged (the server's LIMIT.ALL reply), which is conservative by the
// request's cost. Values a failure policy cannot know (FailOpen,
// FailClosed) are left out; RateLimit-Policy is always sent.
//
// Middleware panics on an invalid configuration, at construction.
func Middleware(l *Limiter, opts MiddlewareOptions) func(http.Handler) http.Handler {
	m := newMiddleware(l, opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

type middleware struct {
	l      *Limiter
	opts   MiddlewareOptions
	free   map[int]bool
	quoted []string // each rule's name as an sf-string
	policy []string // each rule's RateLimit-Policy item
}

func newMiddleware(l *Limiter, opts MiddlewareOptions) *middleware {
	if l == nil {
		panic("clientlib: Middleware needs a Limiter")
	}
	if len(opts.Rules) == 0 && len(opts.Concurrent) == 0 && len(opts.Shape) == 0 {
		panic("clientlib: Middleware needs at least one rule")
	}
	for _, sh := range opts.Shape {
		if sh.Name == "" || sh.Schedule.validate() != nil || sh.MaxWait < 0 {
			panic(fmt.Sprintf("clientlib: shape rule %q needs a name, a valid schedule and a MaxWait of 0 or more", sh.Name))
		}
	}
	for _, c := range opts.Concurrent {
		if c.Name == "" || c.Max < 1 || c.Max > MaxConcurrency || c.Lease <= 0 {
			panic(fmt.Sprintf("clientlib: concurrency rule %q needs a name, a max of 1 to %d and a positive lease", c.Name, MaxConcurrency))
		}
	}
	m := &middleware{l: l, opts: opts, free: map[int]bool{}}
	seen := map[string]bool{}
	for _, rule := range opts.Rules {
		if err := rule.Limit.validate(); err != nil {
			panic(fmt.Sprintf("clientlib: rule %q: %v", rule.Name, err))
		}
		q, ok := sfString(rule.Name)
		if !ok || rule.Name == "" {
			panic(fmt.Sprintf("clientlib: rule name %q must be non-empty printable ASCII", rule.Name))
		}
		if seen[rule.Name] {
			panic(fmt.Sprintf("clientlib: rule name %q used twice", rule.Name))
		}
		seen[rule.Name] = true
		m.quoted = append(m.quoted, q)
		w := ceilSeconds(rule.Limit.Window())
		m.policy = append(m.policy, q+";q="+strconv.FormatInt(rule.Limit.Max(), 10)+";w="+strconv.FormatInt(max(w, 1), 10))
	}
	for _, s := range opts.FreeStatuses {
		m.free[s] = true
	}
	if m.opts.Key == nil {
		m.opts.Key = KeyByIP(opts.TrustedProxies...)
	}
	if m.opts.OnLimited == nil {
		m.opts.OnLimited = func(w http.ResponseWriter, r *http.Request, _ AllResult) {
			http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		}
	}
	if m.opts.OnError == nil {
		m.opts.OnError = func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "rate limit check failed", http.StatusInternalServerError)
		}
	}
	return m
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	cost := int64(1)
	if m.opts.Cost != nil {
		cost = m.opts.Cost(r)
	}
	var (
		reqs  = make([]Request, 0, len(m.opts.Rules))
		rules = make([]int, 0, len(m.opts.Rules))
	)
	for i, rule := range m.opts.Rules {
		k := m.keyOf(rule.Key, r)
		if k == "" {
			continue
		}
		reqs = append(reqs, Request{Key: rule.Name + ":" + k, Limit: rule.Limit, Cost: cost})
		rules = append(rules, i)
	}
	var res AllResult
	if len(reqs) > 0 {
		var err error
		if res, err = m.decide(r.Context(), reqs); err != nil {
			m.opts.OnError(w, r, err)
			return
		}
		m.setHeaders(w.Header(), rules, res)
		if !res.Allowed {
			if ra := res.Results[res.Index].RetryAfter; ra >= 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(max(ceilSeconds(ra), 1), 10))
			}
			m.opts.OnLimited(w, r, res)
			return
		}
	}
	// refused answers a request that Rules admitted but a shape or
	// concurrency rule did not (err: could not ask), refunding what Rules
	// charged it.
	refused := func(wait time.Duration, err error) {
		if len(reqs) > 0 && cost > 0 {
			m.refund(r.Context(), reqs, res)
		}
		if err != nil {
			m.opts.OnError(w, r, err)
			return
		}
		w.Header().Set("Retry-After", strconv.FormatInt(max(ceilSeconds(wait), 1), 10))
		m.opts.OnLimited(w, r, AllResult{Index: -1})
	}
	if wait, err := m.shape(r); err != nil || wait >= 0 {
		refused(wait, err)
		return
	}
	leases, wait, err := m.acquire(r)
	// Given back when the handler returns, however it returns.
	defer func() {
		for _, ls := range leases {
			ls.Release()
		}
	}()
	if err != nil || wait >= 0 {
		refused(wait, err)
		return
	}
	if len(reqs) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	st := &requestState{}
	sw := &statusWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), freeKey{}, st)))
	if cost > 0 && (st.free || m.free[sw.statusOr200()]) {
		m.refund(r.Context(), reqs, res)
	}
}

// shape waits for r's slot on every shape rule that applies. wait is -1
// when every slot has come; otherwise a rule's wait would have passed its
// MaxWait (nothing reserved on it), and wait is what it would have been.
// A request whose context ends while waiting gives its slot back.
func (m *middleware) shape(r *http.Request) (wait time.Duration, err error) {
	for _, sh := range m.opts.Shape {
		k := m.keyOf(sh.Key, r)
		if k == "" {
			continue
		}
		key := sh.Name + ":" + k
		res, err := m.l.Reserve(r.Context(), key, sh.Schedule, 1, sh.MaxWait)
		if err != nil {
			return -1, err
		}
		if !res.Admitted {
			return res.Wait, nil
		}
		if res.Wait <= 0 {
			continue
		}
		timer := time.NewTimer(res.Wait)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			_ = m.l.Cancel(context.WithoutCancel(r.Context()), key, 1)
			return -1, r.Context().Err()
		}
	}
	return -1, nil
}

// keyOf is whom r counts against under a rule whose KeyFunc is fn (nil:
// the middleware's default).
func (m *middleware) keyOf(fn KeyFunc, r *http.Request) string {
	if fn == nil {
		fn = m.opts.Key
	}
	return fn(r)
}

// acquire takes a lease of every concurrency rule that applies to r. wait
// is -1 when all were granted; otherwise one refused, and wait is how long
// until its key's earliest lease ends. The leases taken are returned
// either way, for the caller to release.
func (m *middleware) acquire(r *http.Request) (leases []*Lease, wait time.Duration, err error) {
	for _, c := range m.opts.Concurrent {
		k := m.keyOf(c.Key, r)
		if k == "" {
			continue
		}
		ls, ok, err := m.l.Acquire(r.Context(), c.Name+":"+k, c.Max, c.Lease)
		if err != nil {
			return leases, -1, err
		}
		if !ok {
			return leases, max(ls.NextExpiry, 0), nil
		}
		leases = append(leases, ls)
	}
	return leases, -1, nil
}

// decide uses AllowN for a single rule, which is cheaper to parse than
// LIMIT.ALL's nested reply.
func (m *middleware) decide(ctx context.Context, reqs []Request) (AllResult, error) {
	if len(reqs) > 1 {
		return m.l.All(ctx, reqs...)
	}
	r, err := m.l.AllowN(ctx, reqs[0].Key, reqs[0].Limit, reqs[0].Cost)
	if err != nil {
		return AllResult{}, err
	}
	res := AllResult{Allowed: r.Allowed, Index: -1, Results: []Result{r}, Source: r.Source, Err: r.Err}
	if !r.Allowed {
		res.Index = 0
	}
	return res, nil
}

// refund gives the cost back wherever it was charged. The response has been
// written; the refund must not be cut short by the client going away.
func (m *middleware) refund(ctx context.Context, reqs []Request, res AllResult) {
	ctx = context.WithoutCancel(ctx)
	for i, q := range reqs {
		switch res.Results[i].Source {
		case FromServer:
			// A failed refund only leaves the request charged.
			_, _, _ = m.l.Refund(ctx, q.Key, q.Cost)
		case FromFallback:
			m.l.refundFallback(q.Key, q.Limit, q.Cost)
		}
	}
}

func (m *middleware) setHeaders(h http.Header, rules []int, res AllResult) {
	var policy, state []string
	pick := -1
	for i, r := range res.Results {
		policy = append(policy, m.policy[rules[i]])
		if r.Remaining < 0 {
			continue
		}
		state = append(state, m.quoted[rules[i]]+";r="+strconv.FormatInt(r.Remaining, 10)+";t="+strconv.FormatInt(ceilSeconds(r.ResetAfter), 10))
		if pick < 0 || moreRestrictive(r, res.Results[pick]) {
			pick = i
		}
	}
	if !res.Allowed && res.Results[res.Index].Remaining >= 0 {
		// The limit that refused is the one the client must wait for.
		pick = res.Index
	}
	h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	if pick < 0 {
		return
	}
	h.Set("RateLimit", strings.Join(state, ", "))
	p := res.Results[pick]
	h.Set("X-RateLimit-Limit", strconv.FormatInt(p.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(p.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(p.ResetAfter), 10))
}

// moreRestrictive: fewer remaining, then the longer wait for a full reset.
func moreRestrictive(a, b Result) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}

// ceilSeconds rounds up: a client told to come back a fraction of a second
// early is refused again.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString serializes s as a structured-field string (RFC 8941 3.3.3):
// printable ASCII in double quotes, with " and \ escaped.
func sfString(s string) (string, bool) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", false
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), true
}

// statusWriter records the status the handler sent, for FreeStatuses.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	// 1xx responses are interim; the final status comes later.
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Flush keeps streaming handlers working through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
