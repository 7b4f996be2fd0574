package clientlib

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis ignores context deadlines for socket I/O unless the client was
// built with ContextTimeoutEnabled; a default client waits out its own
// ReadTimeout (5 s). A limiter whose 50 ms timeout silently became 5 s would
// stall every request during an outage, so the timeout is enforced here
// either way:
//
//   - a client known to honour deadlines gets the deadline on the context
//     and the call runs on the caller's goroutine (the fast path);
//   - any other client's call runs on a helper goroutine, and the caller
//     stops waiting at the deadline. The abandoned command finishes in the
//     background (and may still be applied by the server); at most maxStuck
//     of them are allowed at once, after which calls go straight to the
//     failure policy rather than piling up goroutines and connections.

// maxStuck bounds abandoned in-flight commands per Limiter.
const maxStuck = 256

// honoursDeadlines reports whether go-redis will apply a context deadline to
// rdb's socket I/O. Unknown implementations (wrappers) are assumed not to.
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// errTimeout is what a call that outlived the Limiter's timeout returns.
type errTimeout struct{ d time.Duration }

func (e errTimeout) Error() string { return fmt.Sprintf("clientlib: no reply within %v", e.d) }
func (e errTimeout) Unwrap() error { return context.DeadlineExceeded }

var errTooManyStuck = fmt.Errorf("%w: too many commands still waiting for the server", ErrUnavailable)

// Call states for the helper-goroutine path.
const (
	callRunning int32 = iota
	callDone
	callAbandoned
)

// process sends cmd with the Limiter's timeout in force. pooled, if not
// nil, holds cmd's arguments and is released once go-redis is done with
// them. The returned error is cmd's, or a timeout.
func (l *Limiter) process(ctx context.Context, cmd redis.Cmder, pooled *decisionArgs) error {
	cctx, cancel := l.withTimeout(ctx)
	if l.honours || cctx.Done() == nil {
		_ = l.rdb.Process(cctx, cmd)
		cancel()
		if pooled != nil {
			pooled.release()
		}
		return cmd.Err()
	}
	if l.stuck.Load() >= l.maxStuck {
		cancel()
		if pooled != nil {
			pooled.release()
		}
		return errTooManyStuck
	}
	var state atomic.Int32
	done := make(chan struct{})
	go func() {
		_ = l.rdb.Process(cctx, cmd)
		if pooled != nil {
			pooled.release()
		}
		if !state.CompareAndSwap(callRunning, callDone) {
			l.stuck.Add(-1)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-cctx.Done():
		if state.CompareAndSwap(callRunning, callAbandoned) {
			l.stuck.Add(1)
			cancel()
			if err := ctx.Err(); err != nil {
				return err
			}
			return errTimeout{l.timeout}
		}
		// It finished as the deadline passed: use its answer.
		<-done
	}
	cancel()
	return cmd.Err()
}
