package server

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// Authentication: AUTH and HELLO ... AUTH check a user's password in
// constant time; every failure is counted (INFO, metrics), logged at a
// bounded rate, and entered in ACL LOG; a connection that fails too often
// is closed; and failures per source address are themselves rate limited,
// with Sluice's own GCRA, so a brute force from many connections gets no
// further than one from a single connection.

// Defaults for Config.AuthMaxFailures and the per-address limit.
const (
	defaultAuthMaxFailures = 10
	// Per source address: a bucket of authBurst failures that refills at
	// one every authRefill.
	authBurst  = 20
	authRefill = 3 * time.Second
	// authTrackedSources bounds the per-address table; past it the
	// entries that are back to a full bucket are dropped first.
	authTrackedSources = 65536
)

var errAuthThrottled = errors.New("too many failed authentication attempts from this address; try again later")

// authThrottle is the per-source-address failure limit: one GCRA bucket
// (a TAT) per address. Safe for concurrent use.
type authThrottle struct {
	mu   sync.Mutex
	tats map[string]int64
	p    ratelimit.GCRAParams
}

func newAuthThrottle() *authThrottle {
	return &authThrottle{
		tats: map[string]int64{},
		p:    ratelimit.GCRAParams{MaxBurst: authBurst - 1, Count: 1, Period: int64(authRefill)},
	}
}

// blocked reports whether the address has no failures left, and for how
// long.
func (a *authThrottle) blocked(addr string, now int64) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tat, ok := a.tats[addr]
	_, _, d := ratelimit.GCRADecide(tat, ok && tat > now, a.p, 1, now)
	return d.Limited, time.Duration(d.RetryAfter)
}

// fail charges one failure to the address.
func (a *authThrottle) fail(addr string, now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.tats) >= authTrackedSources {
		for k, tat := range a.tats {
			if tat <= now {
				delete(a.tats, k)
			}
		}
		if len(a.tats) >= authTrackedSources {
			// Every tracked address is failing right now: forgetting one
			// at random is the bounded-memory choice.
			for k := range a.tats {
				delete(a.tats, k)
				break
			}
		}
	}
	tat, ok := a.tats[addr]
	if next, write, _ := ratelimit.GCRADecide(tat, ok && tat > now, a.p, 1, now); write {
		a.tats[addr] = next
	}
}

// sourceAddr is the address failures are counted against: the peer's IP,
// without the port.
func sourceAddr(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// authenticate checks a user and password for the connection and, on
// success, makes it that user. cmdName is the command as the client sent
// it, for ACL LOG.
func (s *Server) authenticate(c *client, user string, pass []byte, cmdName []byte) error {
	now := time.Now().UnixNano()
	src := sourceAddr(c.addr)
	if blocked, retry := s.authThrottle.blocked(src, now); blocked {
		s.authDenied.Add(1)
		s.logAuthFailure(c, user, "rate limited", retry)
		return errAuthThrottled
	}
	ref, ok := s.acl.authenticate(user, pass)
	if ok {
		c.mu.Lock()
		c.user = ref
		c.mu.Unlock()
		c.authed = true
		c.authFailures = 0
		return nil
	}
	s.authDenied.Add(1)
	s.authThrottle.fail(src, now)
	s.aclLog.add(aclLogEntry{reason: "auth", object: string(cmdName), username: user, at: time.Now(), client: c.describe()})
	s.logAuthFailure(c, user, "wrong password or unknown user", 0)
	c.authFailures++
	if max := s.authMaxFailures.Load(); max > 0 && int64(c.authFailures) >= max {
		// The reply still goes out; then the connection closes, so a
		// guesser must reconnect (and meet the per-address limit).
		c.quit = true
	}
	return errBadPass
}

// logAuthFailure logs failed authentication, at most one line a second:
// under a brute force, one line with the count since the last one.
func (s *Server) logAuthFailure(c *client, user, why string, retry time.Duration) {
	s.authLogMu.Lock()
	defer s.authLogMu.Unlock()
	s.authLogPending++
	if time.Since(s.authLogLast) < time.Second {
		return
	}
	attrs := []any{"client", c.addr, "user", user, "reason", why, "failures_since_last_line", s.authLogPending}
	if retry > 0 {
		attrs = append(attrs, "retry_after", strconv.FormatFloat(retry.Seconds(), 'f', 1, 64)+"s")
	}
	s.log.Warn("authentication failed", attrs...)
	s.authLogLast, s.authLogPending = time.Now(), 0
}
