package clientlib

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// Concurrency limits (CONC.ACQUIRE, CONC.RELEASE, CONC.RENEW): at most max
// leases on a key at once, each ending on its own after its lease time, so
// a holder that dies without releasing frees its slot then.

// MaxConcurrency is the largest max a concurrency limit takes.
const MaxConcurrency = 65536

var (
	errConcMax   = fmt.Errorf("%w: a concurrency limit's max must be 1 to %d", ErrInvalidLimit, MaxConcurrency)
	errConcLease = fmt.Errorf("%w: a lease must be positive and at most 2^61 ns", ErrInvalidLimit)
)

// Lease is the answer to Acquire: a slot of a concurrency limit, or the
// refusal of one. Its methods are safe for concurrent use.
type Lease struct {
	// Key is the limit's key.
	Key string
	// ID names the lease on the server (CONC.RELEASE key id). Empty when
	// nothing was acquired, and when a failure policy granted the lease
	// without the acquisition reaching the server; when it did reach it
	// and the answer was lost, the server may hold a lease by this id.
	ID string
	// Holders is how many leases the key held after this call, this one
	// included; -1 when a failure policy answered.
	Holders int64
	// NextExpiry is how long until the key's earliest lease ends (0 when
	// it holds none): when a refused caller may find a slot at the latest.
	// -1 when a failure policy answered.
	NextExpiry time.Duration
	// Source is who answered: the server, or a failure policy
	// (FromFailOpen, FromFailClosed, FromFallback).
	Source Source
	// Err is the transport error a failure policy answered for.
	Err error

	l        *Limiter
	acquired bool
	// sent: the acquisition reached the wire, so the server may hold the
	// lease even when a failure policy answered (its answer was lost).
	sent     bool
	released atomic.Bool
}

// Acquire takes one of max concurrent leases on key for lease
// (CONC.ACQUIRE). ok reports whether it was granted; the Lease is non-nil
// whenever err is nil, and a granted one must be given back with Release
// (or left to end on its own after lease, if its holder dies). Renew
// extends it.
//
// Each acquisition carries a fresh lease id, or the context's WithRequestID
// id. A retry with the same id renews the lease rather than taking a second
// slot, so, like a decision, an acquisition whose answer was lost is sent
// once more with its id before the failure policy answers (see the package
// doc). An answer that stays lost may leave the server holding a slot for
// the id until the lease ends.
//
// When the server cannot be asked, the Limiter's failure policy answers:
// FailOpen grants, FailClosed refuses, FailError returns the error, and
// FailFallback grants up to max leases (divided by WithFallbackShare) per
// key among this process's own, ending after lease as on the server.
// Error replies (bad arguments, WRONGTYPE) are returned as errors.
func (l *Limiter) Acquire(ctx context.Context, key string, max int, lease time.Duration) (*Lease, bool, error) {
	if max < 1 || max > MaxConcurrency {
		return nil, false, errConcMax
	}
	if lease <= 0 || int64(lease) > ratelimit.MaxDuration {
		return nil, false, errConcLease
	}
	if err := checkRequestID(ctx); err != nil {
		return nil, false, err
	}
	sent := l.mono()
	if l.skipServer(sent) {
		return l.concPolicy(key, max, lease, "", errSkipped)
	}
	var id reqIDArg
	l.idFor(ctx, &id)
	var secs decimalArg
	secs.set(lease)
	args := []interface{}{"CONC.ACQUIRE", key, max, &secs, "ID", &id}
	// The same id on a retry: if the first attempt was applied, the
	// second renews its lease instead of taking a second slot.
	cmd, err := l.sendWithRetry(ctx, 1, args)
	switch {
	case err == nil:
		l.observe(true, sent, nil)
		l.answers.answered(FromServer)
	case callerGaveUp(ctx):
		return nil, false, err
	case unavailable(err):
		l.refreshRoutes(ctx)
		l.observe(false, sent, err)
		return l.concPolicy(key, max, lease, string(id.buf[:id.n]), err)
	default:
		l.observe(true, sent, nil)
		return nil, false, err
	}
	v := cmd.Val()
	if len(v) != 4 {
		return nil, false, fmt.Errorf("%w: CONC.ACQUIRE reply %v", errReplyShape, v)
	}
	acquired, ok1 := v[0].(int64)
	holders, ok2 := v[2].(int64)
	next, ok3 := v[3].(int64)
	gotID, isStr := v[1].(string)
	if !ok1 || !ok2 || !ok3 || (acquired == 1) != isStr || (isStr && gotID != string(id.buf[:id.n])) {
		return nil, false, fmt.Errorf("%w: CONC.ACQUIRE reply %v", errReplyShape, v)
	}
	ls := &Lease{Key: key, ID: gotID, Holders: holders, NextExpiry: millis(next), Source: FromServer, l: l, acquired: acquired == 1, sent: true}
	return ls, ls.acquired, nil
}

// concPolicy answers an acquisition without the server; sentID is the id
// of the acquisition that was sent and lost ("" when none was sent).
func (l *Limiter) concPolicy(key string, limit int, lease time.Duration, sentID string, cause error) (*Lease, bool, error) {
	l.policyAnswers.Add(1)
	cause = failedErr(cause)
	ls := &Lease{Key: key, Holders: -1, NextExpiry: -1, Err: cause, l: l, sent: sentID != ""}
	switch l.policy {
	case FailOpen:
		ls.Source, ls.acquired = FromFailOpen, true
	case FailClosed:
		ls.Source = FromFailClosed
	case FailError:
		return nil, false, cause
	default:
		ls.Source = FromFallback
		ls.acquired = l.concFallback.acquire(ls, limit, lease, l)
	}
	l.answers.answered(ls.Source)
	if ls.acquired {
		ls.ID = sentID
	}
	return ls, ls.acquired, nil
}

// Release gives the lease back (CONC.RELEASE), best effort: it waits at
// most the Limiter's timeout, and a lease it could not release ends on its
// own. Releasing twice, or releasing a refused or nil Lease, does nothing.
// It needs no context, so that a deferred Release still runs after the
// request's context is done.
func (ls *Lease) Release() error {
	if ls == nil || !ls.acquired || !ls.released.CompareAndSwap(false, true) {
		return nil
	}
	l := ls.l
	if ls.Source == FromFallback {
		l.concFallback.release(ls)
	}
	// A policy's lease may be held on the server too (a lost answer);
	// asking while the server is known to be down would only wait.
	if ls.Source != FromServer && (!ls.sent || l.degraded.Load()) {
		return nil
	}
	cmd := redis.NewIntCmd(context.Background(), "CONC.RELEASE", ls.Key, ls.ID)
	cmd.SetFirstKeyPos(1)
	return l.do(context.Background(), cmd)
}

// Renew extends a lease to end lease from now (CONC.RENEW). It reports
// false when the lease was released or has already ended (its slot may be
// someone else's by then: stop the work it guarded). A failure policy's
// lease is renewed in this process. Errors are returned, never masked.
func (ls *Lease) Renew(ctx context.Context, lease time.Duration) (bool, error) {
	if lease <= 0 || int64(lease) > ratelimit.MaxDuration {
		return false, errConcLease
	}
	if ls == nil || !ls.acquired || ls.released.Load() {
		return false, nil
	}
	switch ls.Source {
	case FromFailOpen:
		return true, nil
	case FromFallback:
		return ls.l.concFallback.renew(ls, lease, ls.l), nil
	}
	var secs decimalArg
	secs.set(lease)
	cmd := redis.NewIntCmd(ctx, "CONC.RENEW", ls.Key, ls.ID, &secs)
	cmd.SetFirstKeyPos(1)
	if err := ls.l.do(ctx, cmd); err != nil {
		return false, err
	}
	return cmd.Val() == 1, nil
}

// concFallback is FailFallback's concurrency limit: this process's own
// leases per key, each ending after its lease on the monotonic clock, at
// most max divided by WithFallbackShare (rounded up) at once. It holds at
// most the fallback capacity's keys; past it, a key is forgotten, with its
// leases: like the decision fallback, it is approximate by design.
type concFallback struct {
	mu   sync.Mutex
	keys map[string][]fbLease
}

type fbLease struct {
	lease *Lease
	end   int64 // monotonic ns
}

// live drops key's ended leases and returns the others. Callers hold mu.
func (f *concFallback) live(key string, now int64) []fbLease {
	held := f.keys[key]
	kept := held[:0]
	for _, h := range held {
		if h.end > now {
			kept = append(kept, h)
		}
	}
	if len(kept) == 0 {
		delete(f.keys, key)
		return nil
	}
	f.keys[key] = kept
	return kept
}

func (f *concFallback) acquire(ls *Lease, limit int, lease time.Duration, l *Limiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := l.mono()
	if f.keys == nil {
		f.keys = map[string][]fbLease{}
	}
	held := f.live(ls.Key, now)
	share := max(l.fallbackShare, 1)
	if int64(len(held)) >= (int64(limit)+share-1)/share {
		return false
	}
	if held == nil && len(f.keys) >= l.fallbackCap {
		for k := range f.keys {
			f.live(k, now)
		}
		for k := range f.keys {
			if len(f.keys) < l.fallbackCap {
				break
			}
			delete(f.keys, k)
		}
	}
	f.keys[ls.Key] = append(held, fbLease{lease: ls, end: now + int64(lease)})
	return true
}

func (f *concFallback) release(ls *Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.keys[ls.Key]
	for i, h := range held {
		if h.lease == ls {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(f.keys, ls.Key)
	} else {
		f.keys[ls.Key] = held
	}
}

func (f *concFallback) renew(ls *Lease, lease time.Duration, l *Limiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := l.mono()
	for i, h := range f.live(ls.Key, now) {
		if h.lease == ls {
			f.keys[ls.Key][i].end = now + int64(lease)
			return true
		}
	}
	return false
}
