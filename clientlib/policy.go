package clientlib

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Policy says what a decision returns when the server cannot be asked: a
// transport error, a timeout, or a server that says it cannot serve
// (LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN). Error replies about the
// arguments are never masked by a policy; they come back as errors.
type Policy uint8

const (
	// FailFallback decides with an in-process limiter of the same shape.
	// It counts only this process's traffic, so N processes admit up to N
	// times the limit (see WithFallbackShare). The zero Policy.
	FailFallback Policy = iota
	// FailOpen admits. Right for paid quota, where refusing a paying
	// customer because the limiter is down costs more than an overshoot.
	FailOpen
	// FailClosed refuses, suggesting a retry after one second. Right for
	// abuse-facing limits (login, signup, password reset), where an outage
	// must not open the door to brute force.
	FailClosed
	// FailError returns the error and lets the caller decide.
	FailError
)

var policyNames = [...]string{"fallback", "open", "closed", "error"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// ErrUnavailable is wrapped by every error a failure policy answered for
// (Result.Err, AllResult.Err, and the error FailError returns), together
// with the transport error itself.
var ErrUnavailable = errors.New("clientlib: rate-limit server unavailable")

// errSkipped stands for the transport error while the limiter is degraded
// and spares the server a probe (WithProbeInterval).
var errSkipped = fmt.Errorf("%w: waiting for the next probe", ErrUnavailable)

// Alarm reports a change in the server's availability as a Limiter sees it.
type Alarm struct {
	// Active is true when the failure policy starts answering, false when
	// the server answers again.
	Active bool
	// Policy is the Limiter's failure policy.
	Policy Policy
	// Err is the error that started the episode; nil when it ends.
	Err error
}

// Stats are a Limiter's counters, read atomically.
type Stats struct {
	// Degraded reports whether the failure policy is answering now.
	Degraded bool
	// Alarms counts episodes: how many times the policy started answering.
	Alarms uint64
	// PolicyAnswers counts decisions the failure policy answered.
	PolicyAnswers uint64
	// CacheHits counts decisions the over-limit cache answered.
	CacheHits uint64
}

// unavailable tells a server that cannot be reached, or says it cannot
// serve right now, from a server that answered. Only the first triggers the
// failure policy: masking an argument error would hide a bug.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	// MOVED, ASK and READONLY reach the caller only when the cluster
	// client ran out of redirects (a group still electing its leader):
	// the decision was not made, and the server is as good as down.
	for _, p := range [...]string{"LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "ERR max number of clients reached", "MOVED ", "ASK ", "READONLY "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return outcomeUnknown(err)
}

// callerGaveUp reports whether the caller's own context ended the call. Its
// cancellation says nothing about the server, so it neither triggers the
// policy nor raises the alarm.
func callerGaveUp(ctx context.Context) bool { return ctx.Err() != nil }

// observe records whether the server answered a call sent at sent (monotonic
// ns) and fires the alarm on a change. The fast path is one atomic load. A
// call sent before the last change is stale evidence (an answer that was in
// flight when the server died, or a failure from before it came back) and
// is ignored, so the alarm does not flap at the edges of an outage.
func (l *Limiter) observe(ok bool, sent int64, err error) {
	if !ok {
		l.serverErrors.Add(1)
	}
	if l.degraded.Load() != ok {
		return
	}
	l.alarmMu.Lock()
	defer l.alarmMu.Unlock()
	if l.degraded.Load() != ok || sent < l.changedAt {
		return
	}
	now := l.mono()
	l.changedAt = now
	l.degraded.Store(!ok)
	if !ok {
		l.alarms.Add(1)
		l.nextProbe.Store(now + int64(l.probe))
	}
	if l.onAlarm != nil {
		a := Alarm{Active: !ok, Policy: l.policy}
		if !ok {
			a.Err = err
		}
		// Under alarmMu, so that alarms arrive in the order of the changes.
		l.onAlarm(a)
	}
}

// skipServer reports whether a call should go straight to the policy: the
// limiter is degraded and another call probed the server less than a probe
// interval ago.
func (l *Limiter) skipServer(mono int64) bool {
	if l.probe <= 0 || !l.degraded.Load() {
		return false
	}
	next := l.nextProbe.Load()
	if mono < next {
		return true
	}
	// One caller wins the probe; the others keep using the policy.
	return !l.nextProbe.CompareAndSwap(next, mono+int64(l.probe))
}

// failedErr wraps a transport error so that errors.Is finds both
// ErrUnavailable and the cause.
func failedErr(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// policyResult answers one limit without the server.
func (l *Limiter) policyResult(key string, limit Limit, cost int64, now timeNow, cause error) (Result, error) {
	l.policyAnswers.Add(1)
	cause = failedErr(cause)
	switch l.policy {
	case FailOpen:
		l.answers.answered(FromFailOpen)
		return Result{Allowed: true, Limit: limit.Max(), Remaining: -1, RetryAfter: -1, ResetAt: now.wall, Source: FromFailOpen, Err: cause}, nil
	case FailClosed:
		l.answers.answered(FromFailClosed)
		return failClosedResult(limit, now, cause), nil
	case FailError:
		return Result{}, cause
	}
	l.answers.answered(FromFallback)
	r := l.fallback.decide(key, limit, cost, now)
	r.Err = cause
	return r, nil
}

// failClosedRetry is the Retry-After a FailClosed refusal suggests: the
// server's state is unknown, so any figure is a guess; one second keeps
// clients from hammering without locking them out for long.
const failClosedRetry = time.Second

func failClosedResult(limit Limit, now timeNow, cause error) Result {
	return Result{Limit: limit.Max(), Remaining: -1, RetryAfter: failClosedRetry, ResetAt: now.wall, Source: FromFailClosed, Err: cause}
}

// policyAll answers an All call without the server.
func (l *Limiter) policyAll(reqs []Request, now timeNow, cause error) (AllResult, error) {
	l.policyAnswers.Add(1)
	cause = failedErr(cause)
	res := AllResult{Index: -1, Err: cause, Results: make([]Result, len(reqs))}
	switch l.policy {
	case FailOpen:
		res.Allowed, res.Source = true, FromFailOpen
		for i, q := range reqs {
			res.Results[i] = Result{Allowed: true, Limit: q.Limit.Max(), Remaining: -1, RetryAfter: -1, ResetAt: now.wall, Source: FromFailOpen, Err: cause}
		}
		l.answers.answered(res.Source)
		return res, nil
	case FailClosed:
		res.Index, res.Source = 0, FromFailClosed
		for i, q := range reqs {
			res.Results[i] = failClosedResult(q.Limit, now, cause)
		}
		l.answers.answered(res.Source)
		return res, nil
	case FailError:
		return AllResult{}, cause
	}
	res.Source = FromFallback
	l.answers.answered(res.Source)
	l.fallback.all(reqs, res.Results, now)
	res.Allowed = true
	for i := range res.Results {
		res.Results[i].Err = cause
		if !res.Results[i].Allowed && res.Allowed {
			res.Allowed, res.Index = false, i
		}
	}
	return res, nil
}
