package clientlib

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Shaping (LB.RESERVE): instead of refusing a request that comes early, the
// server gives it a time to go, on one smooth schedule shared by every
// process that uses the key, so that a fleet of workers calling an API
// that allows N per second together never goes faster, and wastes no slot.

// Schedule is a smooth rate: Rate units per Period, Burst of them (at
// least 1) allowed to go at once after an idle spell.
type Schedule struct {
	Rate   int64
	Period time.Duration
	Burst  int64
}

var errSchedule = fmt.Errorf("%w: a schedule needs a positive rate, period and burst", ErrInvalidLimit)

func (s Schedule) validate() error {
	if s.Rate < 1 || s.Period <= 0 || s.Burst < 1 {
		return errSchedule
	}
	return nil
}

// ErrWaitTooLong is Wait's answer when the caller's slot would come after
// its context's deadline: nothing was reserved.
var ErrWaitTooLong = errors.New("clientlib: the wait for a slot would outlast the context's deadline")

// Reservation is LB.RESERVE's answer.
type Reservation struct {
	// Admitted: the units are reserved; go after Wait. False only when
	// Wait would have passed the maximum asked for (nothing is reserved).
	Admitted bool
	// Wait is how long the caller must wait before it goes (0: now),
	// rounded up to the millisecond.
	Wait time.Duration
	// Ahead is the units reserved before this one that may not go yet.
	Ahead int64
	// ResetAfter is when the schedule is empty again.
	ResetAfter time.Duration
}

// Reserve books cost units of key's schedule. maxWait bounds the wait: a
// longer one reserves nothing (Admitted false, Wait what it would have
// been); negative means no bound. Errors are returned as they are: there is
// no local stand-in for a shared schedule.
func (l *Limiter) Reserve(ctx context.Context, key string, s Schedule, cost int64, maxWait time.Duration) (Reservation, error) {
	if err := s.validate(); err != nil {
		return Reservation{}, err
	}
	if cost < 0 {
		return Reservation{}, errNegativeCost
	}
	args := []interface{}{"LB.RESERVE", key, s.Rate, string(appendSeconds(nil, s.Period)), s.Burst, cost}
	if maxWait >= 0 {
		args = append(args, "MAXWAIT", maxWait.Milliseconds())
	}
	cmd := redis.NewIntSliceCmd(ctx, append(args, "MS")...)
	cmd.SetFirstKeyPos(1)
	if err := l.do(ctx, cmd); err != nil {
		return Reservation{}, err
	}
	v := cmd.Val()
	if len(v) != 4 {
		return Reservation{}, fmt.Errorf("%w: LB.RESERVE gave %d fields, want 4", errReplyShape, len(v))
	}
	return Reservation{Admitted: v[0] == 1, Wait: millis(v[1]), Ahead: v[2], ResetAfter: millis(v[3])}, nil
}

// Cancel gives back cost units of key's schedule that were reserved and
// not used (LB.CANCEL), so that the callers behind them go sooner.
func (l *Limiter) Cancel(ctx context.Context, key string, cost int64) error {
	if cost < 0 {
		return errNegativeCost
	}
	cmd := redis.NewCmd(ctx, "LB.CANCEL", key, cost)
	cmd.SetFirstKeyPos(1)
	if err := l.do(ctx, cmd); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

// Wait reserves one unit of key's schedule and sleeps until its slot, as
// golang.org/x/time/rate's Wait does in one process. A slot past ctx's
// deadline is not reserved (ErrWaitTooLong); when ctx ends while waiting,
// the reservation is cancelled, so that a caller that gives up does not
// slow everyone behind it, and ctx's error is returned.
func (l *Limiter) Wait(ctx context.Context, key string, s Schedule) error {
	maxWait := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		if maxWait = time.Until(dl); maxWait <= 0 {
			return context.DeadlineExceeded
		}
	}
	r, err := l.Reserve(ctx, key, s, 1, maxWait)
	if err != nil {
		return err
	}
	if !r.Admitted {
		return fmt.Errorf("%w (the slot is %v away)", ErrWaitTooLong, r.Wait)
	}
	if r.Wait <= 0 {
		return nil
	}
	timer := time.NewTimer(r.Wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		// The caller's context is over; the cancel gets the Limiter's
		// own timeout.
		_ = l.Cancel(context.WithoutCancel(ctx), key, 1)
		return ctx.Err()
	}
}
