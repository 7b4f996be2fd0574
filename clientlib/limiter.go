package clientlib

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds each call to the server. A limiter sits on the
// request path, so a slow answer costs more than the failure policy's.
const DefaultTimeout = 50 * time.Millisecond

// DefaultFallbackCapacity bounds the fallback limiter's entries.
const DefaultFallbackCapacity = 10000

// Option configures a Limiter.
type Option func(*Limiter)

// WithTimeout bounds each call to the server (default DefaultTimeout). It is
// applied with context.WithTimeout unless the caller's context already ends
// sooner. 0 or less adds no timeout of its own.
func WithTimeout(d time.Duration) Option { return func(l *Limiter) { l.timeout = d } }

// WithFailurePolicy sets what decisions return when the server cannot be
// asked (default FailFallback).
func WithFailurePolicy(p Policy) Option { return func(l *Limiter) { l.policy = p } }

// WithAlarm sets a hook called once when the failure policy starts
// answering and once when the server answers again. Calls are serialized
// and made on the goroutine that saw the change, so the hook must be quick
// and must not call the Limiter.
func WithAlarm(fn func(Alarm)) Option { return func(l *Limiter) { l.onAlarm = fn } }

// WithProbeInterval makes a degraded Limiter ask the server at most once per
// d and answer every other call from the failure policy at once, instead of
// letting each call wait for its own timeout against a server that is gone.
// Default 0: every call tries the server.
func WithProbeInterval(d time.Duration) Option { return func(l *Limiter) { l.probe = d } }

// WithContextDeadlines declares that rdb applies context deadlines to its
// socket I/O, as go-redis clients built with ContextTimeoutEnabled do. The
// Limiter detects this itself for *redis.Client, *redis.ClusterClient and
// *redis.Ring; the option is for wrappers of them.
func WithContextDeadlines() Option { return func(l *Limiter) { l.honours = true } }

// WithFallbackCapacity bounds the fallback limiter's entries (default
// DefaultFallbackCapacity). When full, the oldest entry is dropped, which
// forgets that key's usage: the fallback is approximate by design.
func WithFallbackCapacity(n int) Option { return func(l *Limiter) { l.fallbackCap = n } }

// WithFallbackShare tells the fallback limiter how many processes share
// each limit (default 1). It enforces 1/n of each limit (rounded up), so
// that n processes together stay near the limit instead of at n times it.
func WithFallbackShare(n int) Option { return func(l *Limiter) { l.fallbackShare = int64(n) } }

// WithOverLimitCache enables the over-limit cache with room for capacity
// key+limit pairs (0, the default, disables it). Once the server refuses a
// key+limit with a retry time, calls for the same key, limit and at least
// the same cost are refused locally until then, without a round trip.
func WithOverLimitCache(capacity int) Option { return func(l *Limiter) { l.cacheCap = capacity } }

// Limiter makes rate-limit decisions on a Sluice server through go-redis.
// It is safe for concurrent use.
type Limiter struct {
	rdb           redis.UniversalClient
	timeout       time.Duration
	policy        Policy
	onAlarm       func(Alarm)
	probe         time.Duration
	fallbackCap   int
	fallbackShare int64
	cacheCap      int

	fallback *fallback
	cache    *overLimitCache // nil when disabled
	honours  bool            // rdb applies context deadlines itself
	stuck    atomic.Int64    // abandoned commands still in flight
	maxStuck int64

	// clock replaces time.Now in tests (nil otherwise). Monotonic readings
	// are measured from epoch.
	clock func() time.Time
	epoch time.Time

	degraded  atomic.Bool
	nextProbe atomic.Int64
	alarmMu   sync.Mutex
	changedAt int64 // mono ns of the last change of degraded; under alarmMu

	alarms        atomic.Uint64
	policyAnswers atomic.Uint64
	answers       answerCounts  // decisions by Source (metrics.go)
	serverErrors  atomic.Uint64 // calls that found the server unavailable

	ids *idSource // request ids (reqid.go)

	concFallback concFallback // FailFallback's concurrency limits (conc.go)
}

// NewLimiter returns a Limiter that sends its commands through rdb: a
// *redis.Client, a *redis.ClusterClient, or any client the application
// already has.
func NewLimiter(rdb redis.UniversalClient, opts ...Option) *Limiter {
	l := &Limiter{
		rdb:           rdb,
		timeout:       DefaultTimeout,
		fallbackCap:   DefaultFallbackCapacity,
		fallbackShare: 1,
		maxStuck:      maxStuck,
		ids:           newIDSource(),
	}
	for _, o := range opts {
		o(l)
	}
	l.epoch = l.wall()
	l.honours = l.honours || honoursDeadlines(rdb)
	if l.fallbackCap < 1 {
		l.fallbackCap = DefaultFallbackCapacity
	}
	l.fallback = newFallback(l.fallbackCap, max(l.fallbackShare, 1))
	if l.cacheCap > 0 {
		l.cache = newOverLimitCache(l.cacheCap)
	}
	return l
}

// timeNow is one clock reading: wall time for ResetAt, monotonic
// nanoseconds since the Limiter's epoch for the cache and the fallback.
type timeNow struct {
	wall time.Time
	mono int64
}

func (l *Limiter) now() timeNow {
	t := l.wall()
	return timeNow{wall: t, mono: int64(t.Sub(l.epoch))}
}

// mono reads only the monotonic clock: half the cost of time.Now on the
// cache-hit path, which needs no wall time.
func (l *Limiter) mono() int64 {
	if l.clock != nil {
		return int64(l.clock().Sub(l.epoch))
	}
	return int64(time.Since(l.epoch))
}

func (l *Limiter) wall() time.Time {
	if l.clock != nil {
		return l.clock()
	}
	return time.Now()
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	st := Stats{
		Degraded:      l.degraded.Load(),
		Alarms:        l.alarms.Load(),
		PolicyAnswers: l.policyAnswers.Load(),
	}
	if l.cache != nil {
		st.CacheHits = l.cache.hits()
	}
	return st
}

func nop() {}

// withTimeout applies the Limiter's timeout unless the caller's deadline is
// already the tighter one, which also saves context.WithTimeout's
// allocations.
func (l *Limiter) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, nop
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= l.timeout {
		return ctx, nop
	}
	return context.WithTimeout(ctx, l.timeout)
}

var errNegativeCost = fmt.Errorf("%w: cost must not be negative", ErrInvalidLimit)

// Allow charges one unit against key under limit.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// Peek reports key's state under limit without charging anything.
func (l *Limiter) Peek(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.AllowN(ctx, key, limit, 0)
}

// AllowN charges n units against key under limit if they fit, and nothing
// if they do not. n = 0 peeks.
//
// The error is non-nil for invalid arguments, error replies from the server
// (returned as they are), a cancelled caller context, and, under FailError,
// an unreachable server. Otherwise a failure policy answers and says so in
// Result.Source and Result.Err.
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n int64) (Result, error) {
	if n < 0 {
		return Result{}, errNegativeCost
	}
	sent := l.mono()
	var kh, lh uint64
	if l.cache != nil && n > 0 {
		// Before validation, which costs two divisions: only limits the
		// server accepted are ever cached.
		kh, lh = keyHashOf(key), limit.hash()
		if r, ok := l.cache.get(kh, lh, n, sent); ok {
			return r, nil
		}
	}
	if err := limit.validate(); err != nil {
		return Result{}, err
	}
	if err := checkRequestID(ctx); err != nil {
		return Result{}, err
	}
	if l.skipServer(sent) {
		return l.policyResult(key, limit, n, l.now(), errSkipped)
	}
	v, err := l.decide(ctx, key, limit, n)
	switch {
	case err == nil:
		l.observe(true, sent, nil)
		l.answers.answered(FromServer)
	case callerGaveUp(ctx):
		return Result{}, err
	case unavailable(err):
		l.refreshRoutes(ctx)
		l.observe(false, sent, err)
		return l.policyResult(key, limit, n, l.now(), err)
	default:
		// The server answered, even if with an error.
		l.observe(true, sent, nil)
		return Result{}, err
	}
	r := resultFromReply(v, l.wall())
	if l.cache != nil && !r.Allowed && r.RetryAfter > 0 && n > 0 {
		l.cache.put(kh, lh, n, r, sent)
	}
	return r, nil
}

var errReplyShape = errors.New("clientlib: unexpected reply shape")

// decide sends one decision command with a request id, and once more with
// the same id when the first answer was lost (worthRetrying) while the
// server was answering: the server charges the two attempts once.
func (l *Limiter) decide(ctx context.Context, key string, limit Limit, n int64) ([]int64, error) {
	a := decisionPool.Get().(*decisionArgs)
	l.idFor(ctx, &a.reqID) // checked by the caller
	id := a.reqID          // a is released as soon as go-redis is done with it
	healthy := !l.degraded.Load()
	v, err := l.decideOnce(ctx, a, key, limit, n)
	if n > 0 && healthy && worthRetrying(ctx, err) {
		l.refreshRoutes(ctx)
		a = decisionPool.Get().(*decisionArgs)
		a.reqID = id
		v, err = l.decideOnce(ctx, a, key, limit, n)
	}
	return v, err
}

// decideOnce sends one decision command. Its arguments live in a pooled
// struct and go-redis's IntSliceCmd parses the reply straight into
// []int64, so a call allocates less than a bare rdb.Do of the same command
// (whose reply is a []interface{} of boxed integers).
func (l *Limiter) decideOnce(ctx context.Context, a *decisionArgs, key string, limit Limit, n int64) ([]int64, error) {
	cmd := redis.NewIntSliceCmd(ctx, a.fill(limit, key, n)...)
	cmd.SetFirstKeyPos(1)
	if err := l.process(ctx, cmd, a); err != nil {
		return nil, err
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if len(v) != 5 {
		return nil, fmt.Errorf("%w: %d fields, want 5", errReplyShape, len(v))
	}
	return v, nil
}

// fallbackID keys the fallback limiter by key and limit together, so that
// one key under two limits keeps two states, as two server keys would.
func fallbackID(key string, limit Limit) uint64 {
	return mix(keyHashOf(key) ^ limit.hash())
}

func keyHashOf(key string) uint64 { return xxhash.Sum64String(key) }

// do runs a non-decision command with the Limiter's timeout and tracks the
// server's availability. Its errors are returned, never masked: refunds,
// resets and inspection have no sensible made-up answer.
func (l *Limiter) do(ctx context.Context, cmd redis.Cmder) error {
	sent := l.mono()
	return l.settle(ctx, sent, l.process(ctx, cmd, nil))
}

// settle records how a call sent at sent ended (the server answering or
// not, a reload of a cluster's routes after a failure) and returns the
// error its caller gets.
func (l *Limiter) settle(ctx context.Context, sent int64, err error) error {
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		l.observe(true, sent, nil)
		return err
	case callerGaveUp(ctx):
		return err
	case unavailable(err):
		l.refreshRoutes(ctx)
		l.observe(false, sent, err)
		return failedErr(err)
	}
	l.observe(true, sent, nil)
	return err
}

// Refund gives n units back to key (LIMIT.REFUND), never above full. It
// returns the remaining after the refund; ok is false when the key holds no
// live state, and then nothing was created. Refunds also clear the key from
// the over-limit cache, and when the server is unreachable they are applied
// to the fallback limiter before the error is returned.
func (l *Limiter) Refund(ctx context.Context, key string, n int64) (remaining int64, ok bool, err error) {
	if n < 0 {
		return 0, false, errNegativeCost
	}
	kh := keyHashOf(key)
	if l.cache != nil {
		l.cache.forget(kh)
	}
	if err := checkRequestID(ctx); err != nil {
		return 0, false, err
	}
	// With a request id, as decisions: a refund whose answer was lost is
	// asked again, and a retry (go-redis's own after a broken connection,
	// or the one below) gives the units back once.
	var id reqIDArg
	l.idFor(ctx, &id)
	sent := l.mono()
	cmd, err := resend(l, ctx, func() *redis.IntCmd {
		cmd := redis.NewIntCmd(ctx, "LIMIT.REFUND", key, n, "REQID", &id)
		cmd.SetFirstKeyPos(1)
		return cmd
	})
	err = l.settle(ctx, sent, err)
	switch {
	case errors.Is(err, redis.Nil):
		return 0, false, nil
	case errors.Is(err, ErrUnavailable):
		l.fallback.refundKey(kh, n, l.mono())
		return 0, false, err
	case err != nil:
		return 0, false, err
	}
	return cmd.Val(), true, nil
}

// Reset forgets the state of keys (LIMIT.RESET) and returns how many held
// live state. It also forgets them in this process's over-limit cache and
// fallback limiter, even when the server cannot be reached.
func (l *Limiter) Reset(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	args := make([]interface{}, 0, len(keys)+1)
	args = append(args, "LIMIT.RESET")
	for _, k := range keys {
		args = append(args, k)
		kh := keyHashOf(k)
		if l.cache != nil {
			l.cache.forget(kh)
		}
		l.fallback.forgetKey(kh)
	}
	cmd := redis.NewIntCmd(ctx, args...)
	cmd.SetFirstKeyPos(1)
	if err := l.do(ctx, cmd); err != nil {
		return 0, err
	}
	return cmd.Val(), nil
}

// Info returns what the server stores for key (LIMIT.INFO), or nil when the
// key holds no live limiter state.
func (l *Limiter) Info(ctx context.Context, key string) (*Info, error) {
	cmd := redis.NewCmd(ctx, "LIMIT.INFO", key)
	cmd.SetFirstKeyPos(1)
	if err := l.do(ctx, cmd); err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	return parseInfo(cmd.Val())
}

// parseInfo reads LIMIT.INFO's field/value pairs: a flat array under RESP2,
// a map under RESP3.
func parseInfo(v interface{}) (*Info, error) {
	info := &Info{Fields: map[string]int64{}, Durations: map[string]time.Duration{}}
	set := func(k, v interface{}) error {
		name, ok := k.(string)
		if !ok {
			return fmt.Errorf("%w: LIMIT.INFO field %v", errReplyShape, k)
		}
		switch x := v.(type) {
		case int64:
			info.Fields[name] = x
		case string:
			if name != "family" {
				// Decimal seconds, parsed exactly ("1.5" is 1.5 s).
				d, err := time.ParseDuration(x + "s")
				if err != nil {
					return fmt.Errorf("%w: LIMIT.INFO %s = %q", errReplyShape, name, x)
				}
				info.Durations[name] = d
				return nil
			}
			info.FamilyName = x
			if f, ok := parseFamily(x); ok {
				info.Family = f
			}
		default:
			return fmt.Errorf("%w: LIMIT.INFO %s = %v", errReplyShape, name, v)
		}
		return nil
	}
	switch x := v.(type) {
	case []interface{}:
		if len(x)%2 != 0 {
			return nil, fmt.Errorf("%w: LIMIT.INFO has %d items", errReplyShape, len(x))
		}
		for i := 0; i < len(x); i += 2 {
			if err := set(x[i], x[i+1]); err != nil {
				return nil, err
			}
		}
	case map[interface{}]interface{}:
		for k, v := range x {
			if err := set(k, v); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("%w: LIMIT.INFO returned %T", errReplyShape, v)
	}
	info.Limit = info.Fields["limit"]
	info.Remaining = info.Fields["remaining"]
	info.ResetAt = time.UnixMilli(info.Fields["reset_at_ms"])
	info.ResetAfter = millis(info.Fields["reset_after_ms"])
	return info, nil
}

var errNoRequests = fmt.Errorf("%w: All needs at least one request", ErrInvalidLimit)

// All charges every request's cost if every limit admits it, and nothing
// otherwise (LIMIT.ALL). Results[i].Allowed is limit i's own verdict: when
// another limit refuses, the ones that would have admitted still say so,
// but nothing was charged. The keys must differ, as on the server.
func (l *Limiter) All(ctx context.Context, reqs ...Request) (AllResult, error) {
	if len(reqs) == 0 {
		return AllResult{}, errNoRequests
	}
	for i, q := range reqs {
		if err := q.Limit.validate(); err != nil {
			return AllResult{}, fmt.Errorf("request %d: %w", i, err)
		}
		if q.Cost < 0 {
			return AllResult{}, fmt.Errorf("request %d: %w", i, errNegativeCost)
		}
		for _, p := range reqs[:i] {
			if p.Key == q.Key {
				return AllResult{}, fmt.Errorf("%w: key %q appears twice", ErrInvalidLimit, q.Key)
			}
		}
	}
	sent := l.mono()
	if l.cache != nil {
		for i, q := range reqs {
			if q.Cost == 0 {
				continue
			}
			if r, ok := l.cache.get(keyHashOf(q.Key), q.Limit.hash(), q.Cost, sent); ok {
				return cachedAll(reqs, i, r), nil
			}
		}
	}
	if err := checkRequestID(ctx); err != nil {
		return AllResult{}, err
	}
	if l.skipServer(sent) {
		return l.policyAll(reqs, l.now(), errSkipped)
	}
	args := make([]interface{}, 0, 4+7*len(reqs))
	args = append(args, "LIMIT.ALL", len(reqs))
	for _, q := range reqs {
		args = q.Limit.args(args, q.Key, q.Cost)
	}
	var id reqIDArg
	l.idFor(ctx, &id)
	args = append(args, "REQID", &id)
	// Routed by the first limit's key; the server charges a retry once.
	cmd, err := l.sendWithRetry(ctx, 3, args)
	v := cmd.Val()
	switch {
	case err == nil:
		l.observe(true, sent, nil)
		l.answers.answered(FromServer)
	case callerGaveUp(ctx):
		return AllResult{}, err
	case unavailable(err):
		l.refreshRoutes(ctx)
		l.observe(false, sent, err)
		return l.policyAll(reqs, l.now(), err)
	default:
		l.observe(true, sent, nil)
		return AllResult{}, err
	}
	res, err := parseAll(v, len(reqs), l.wall())
	if err != nil {
		return AllResult{}, err
	}
	if i := res.Index; l.cache != nil && i >= 0 {
		if r := res.Results[i]; !r.Allowed && r.RetryAfter > 0 && reqs[i].Cost > 0 {
			l.cache.put(keyHashOf(reqs[i].Key), reqs[i].Limit.hash(), reqs[i].Cost, r, sent)
		}
	}
	return res, nil
}

// cachedAll answers an All call from one cached refusal. The other limits
// were not consulted, so their Remaining is -1 and ResetAt zero (unknown).
func cachedAll(reqs []Request, i int, hit Result) AllResult {
	res := AllResult{Index: i, Source: FromCache, Results: make([]Result, len(reqs))}
	for j, q := range reqs {
		res.Results[j] = Result{Allowed: true, Limit: q.Limit.Max(), Remaining: -1, RetryAfter: -1, Source: FromCache}
	}
	res.Results[i] = hit
	return res
}

// parseAll reads [limited, index, [reply...]].
func parseAll(v []interface{}, n int, recv time.Time) (AllResult, error) {
	if len(v) != 3 {
		return AllResult{}, fmt.Errorf("%w: LIMIT.ALL has %d items", errReplyShape, len(v))
	}
	limited, ok1 := v[0].(int64)
	index, ok2 := v[1].(int64)
	subs, ok3 := v[2].([]interface{})
	// A refusal must name the limit that refused, and only a refusal may.
	if !ok1 || !ok2 || !ok3 || len(subs) != n || index < -1 || index >= int64(n) || (limited == 0) != (index == -1) {
		return AllResult{}, fmt.Errorf("%w: LIMIT.ALL reply %v", errReplyShape, v)
	}
	res := AllResult{Allowed: limited == 0, Index: int(index), Results: make([]Result, n)}
	var fields [5]int64
	for i, s := range subs {
		arr, ok := s.([]interface{})
		if !ok || len(arr) != 5 {
			return AllResult{}, fmt.Errorf("%w: LIMIT.ALL reply %d is %v", errReplyShape, i, s)
		}
		for j, x := range arr {
			if fields[j], ok = x.(int64); !ok {
				return AllResult{}, fmt.Errorf("%w: LIMIT.ALL reply %d is %v", errReplyShape, i, s)
			}
		}
		res.Results[i] = resultFromReply(fields[:], recv)
	}
	return res, nil
}

// refundFallback is for the middleware's refunds of fallback charges.
func (l *Limiter) refundFallback(key string, limit Limit, n int64) {
	l.fallback.refund(fallbackID(key, limit), n, l.mono())
}
