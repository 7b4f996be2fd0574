package clientlib

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Request ids (REQID): every decision the Limiter sends carries one, so
// that asking again after an answer was lost charges nothing twice. The
// server remembers each id's first reply, per key, for its reqid-window
// (10 s by default) and answers a retry with it.
//
// A call whose answer is lost to a timeout, a dropped connection or a
// cluster's "outcome unknown" is sent once more with the same id before the
// failure policy answers, unless the server was already failing when the
// call began (then a second wait would only delay the policy's answer). A
// call can therefore take up to twice the Limiter's timeout. A caller that retries a request itself (its own
// loop, a job queue) passes its own id with WithRequestID, so that every
// attempt of one logical request is charged at most once.

type reqIDKey struct{}

// WithRequestID returns a context whose decisions (AllowN, Allow, All) are
// sent with request id id instead of a fresh one: any number of attempts
// with that context are charged once, as long as they come within the
// server's reqid-window. id must be 1 to 64 bytes; one id is for one
// logical request (reusing it for another returns the first one's reply).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, reqIDKey{}, id)
}

func requestIDFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(reqIDKey{}).(string)
	return id, ok
}

// errRequestID refuses an id the server would refuse.
var errRequestID = fmt.Errorf("%w: a request id must be 1 to 64 bytes", ErrInvalidLimit)

// idSource makes ids unique across processes without coordination: a
// random 64-bit prefix per Limiter and a counter, 32 hex digits in all.
type idSource struct {
	prefix [16]byte
	next   atomic.Uint64
}

func newIDSource() *idSource {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("clientlib: no randomness for request ids: " + err.Error())
	}
	s := &idSource{}
	hex.Encode(s.prefix[:], raw[:])
	return s
}

// reqIDArg is a request id as a go-redis argument: written as its bytes,
// boxed without allocating (see decimalArg).
type reqIDArg struct {
	buf [64]byte
	n   int
}

func (a *reqIDArg) MarshalBinary() ([]byte, error) { return a.buf[:a.n], nil }

func (a *reqIDArg) fresh(s *idSource) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], s.next.Add(1))
	copy(a.buf[:16], s.prefix[:])
	hex.Encode(a.buf[16:32], n[:])
	a.n = 32
}

func (a *reqIDArg) set(id string) { a.n = copy(a.buf[:], id) }

// checkRequestID refuses a context's id that the server would refuse.
func checkRequestID(ctx context.Context) error {
	if id, ok := requestIDFrom(ctx); ok && (len(id) == 0 || len(id) > len(reqIDArg{}.buf)) {
		return errRequestID
	}
	return nil
}

// idFor fills a with the context's id (checked by checkRequestID) or a
// fresh one.
func (l *Limiter) idFor(ctx context.Context, a *reqIDArg) {
	if id, ok := requestIDFrom(ctx); ok {
		a.set(id)
		return
	}
	a.fresh(l.ids)
}

// worthRetrying reports whether a call's answer was lost in a way that a
// second attempt with the same id can recover: a timeout of the Limiter's
// own (not the caller's), a connection that failed, or a cluster that lost
// its leader before the decision committed.
func worthRetrying(ctx context.Context, err error) bool {
	if err == nil || callerGaveUp(ctx) || errors.Is(err, errTooManyStuck) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		return unavailable(err)
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || unavailable(err)
}

// outcomeUnknown: Sluice's cluster lost its leadership after the command
// was proposed; it may or may not have been applied.
func outcomeUnknown(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "outcome unknown")
}

// refreshRoutes asks a cluster client to reload its slot map after a
// failure, rather than waiting for a MOVED that a dead leader never sends
// (go-redis otherwise keeps dialling it until its periodic reload, a
// minute by default). It is asked on every failure, since a map loaded
// while the group is still electing names the dead leader again. The
// reload runs in the background, and go-redis runs at most one at a time,
// 200 ms apart.
func (l *Limiter) refreshRoutes(ctx context.Context) {
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// sendWithRetry sends a command that carries a request id, and once more
// with the same id when the first answer was lost while the server was
// answering (worthRetrying): the server applies the two attempts once.
// firstKey is the position of the key a cluster client routes by.
func (l *Limiter) sendWithRetry(ctx context.Context, firstKey int8, args []interface{}) (*redis.SliceCmd, error) {
	return resend(l, ctx, func() *redis.SliceCmd {
		cmd := redis.NewSliceCmd(ctx, args...)
		cmd.SetFirstKeyPos(firstKey)
		return cmd
	})
}

// resend sends the command newCmd makes (one carrying a request id), and
// once more, made again, when the first answer was lost while the server
// was answering.
func resend[C redis.Cmder](l *Limiter, ctx context.Context, newCmd func() C) (C, error) {
	healthy := !l.degraded.Load()
	cmd := newCmd()
	err := l.process(ctx, cmd, nil)
	if healthy && worthRetrying(ctx, err) {
		l.refreshRoutes(ctx)
		cmd = newCmd()
		err = l.process(ctx, cmd, nil)
	}
	return cmd, err
}
