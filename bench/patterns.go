package bench

import (
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Patterns: the rate-limiting recipes people build from Redis data types,
// each one operation of several commands sent back to back, identical on
// both servers. One operation counts as one request: its replies are read
// together and it counts as an error if any of them is one.
//
// Every operation draws a number from one counter shared by the run's
// connections, seq, which stands in for the clock: scores, members and
// pushed values are seq, so a key's log holds the operations of the last
// window seqs. With keys chosen uniformly, a window of Size*Keys keeps
// about Size members per key.

// patternArg is one argument: literal bytes, the key, or derived from seq.
type patternArg struct {
	kind patternKind
	lit  []byte
}

type patternKind uint8

const (
	argLiteral   patternKind = iota
	argKey                   // the operation's key
	argSeq                   // seq in decimal
	argSeqWindow             // seq - window: the oldest score a log keeps
)

// pattern is one operation's commands.
type pattern struct {
	cmds   [][]patternArg
	window int64
	// setup, when set, is sent once per key before the load (a log
	// already full, a hash already holding its fields), so the run
	// measures steady state from its first request.
	setup func(key string) []string
}

// replies is how many replies one operation gets.
func (p *pattern) replies() int { return len(p.cmds) }

// appendOp encodes one operation for key at seq.
func (p *pattern) appendOp(dst, key []byte, seq int64) []byte {
	var num [20]byte
	for _, cmd := range p.cmds {
		dst = redcon.AppendArray(dst, len(cmd))
		for _, a := range cmd {
			switch a.kind {
			case argLiteral:
				dst = redcon.AppendBulk(dst, a.lit)
			case argKey:
				dst = redcon.AppendBulk(dst, key)
			case argSeq:
				dst = redcon.AppendBulk(dst, strconv.AppendInt(num[:0], seq, 10))
			case argSeqWindow:
				dst = redcon.AppendBulk(dst, strconv.AppendInt(num[:0], seq-p.window, 10))
			}
		}
	}
	return dst
}

func lit(s string) patternArg { return patternArg{kind: argLiteral, lit: []byte(s)} }

var (
	keyArg    = patternArg{kind: argKey}
	seqArg    = patternArg{kind: argSeq}
	windowArg = patternArg{kind: argSeqWindow}
)

// logSize is how many members a sliding log holds, and how many elements
// a recent-events list keeps.
const (
	logSize  = 100
	listSize = 10
)

// hashBucketPattern: the client-side token bucket, HMGET of its two fields
// then HSET of both.
func hashBucketPattern(Config) *pattern {
	return &pattern{
		cmds: [][]patternArg{
			{lit("HMGET"), keyArg, lit("tokens"), lit("ts")},
			{lit("HSET"), keyArg, lit("tokens"), lit("99"), lit("ts"), seqArg},
		},
		setup: func(key string) []string { return []string{"HSET", key, "tokens", "100", "ts", "0"} },
	}
}

// concPattern: a concurrency slot taken and given back, CONC.ACQUIRE then
// CONC.RELEASE with the operation's seq as the lease id (Sluice only).
func concPattern(Config) *pattern {
	return &pattern{
		cmds: [][]patternArg{
			{lit("CONC.ACQUIRE"), keyArg, lit("20"), lit("30"), lit("ID"), seqArg},
			{lit("CONC.RELEASE"), keyArg, seqArg},
		},
	}
}

// zsetLogPattern: the sorted-set sliding log in MULTI, over a log of
// about logSize members.
func zsetLogPattern(cfg Config) *pattern {
	p := &pattern{
		cmds: [][]patternArg{
			{lit("MULTI")},
			{lit("ZREMRANGEBYSCORE"), keyArg, lit("-inf"), windowArg},
			{lit("ZCARD"), keyArg},
			{lit("ZADD"), keyArg, seqArg, seqArg},
			{lit("EXPIRE"), keyArg, lit("3600")},
			{lit("EXEC")},
		},
		window: int64(logSize) * int64(cfg.Keys),
	}
	p.setup = func(key string) []string {
		// A full log, its scores spread over the window before seq 0:
		// they leave it at the rate the run's own members arrive, so the
		// log holds about logSize members from the first request on.
		args := []string{"ZADD", key}
		step := p.window / logSize
		for i := range int64(logSize) {
			args = append(args, strconv.FormatInt(-p.window+(i+1)*step, 10), "pre"+strconv.FormatInt(i, 10))
		}
		return args
	}
	return p
}

// listRecentPattern: keep the last listSize events, and look at the
// oldest of them.
func listRecentPattern(Config) *pattern {
	return &pattern{
		cmds: [][]patternArg{
			{lit("LPUSH"), keyArg, seqArg},
			{lit("LTRIM"), keyArg, lit("0"), lit(strconv.Itoa(listSize - 1))},
			{lit("LINDEX"), keyArg, lit("-1")},
		},
		setup: func(key string) []string {
			args := []string{"RPUSH", key}
			for i := range listSize {
				args = append(args, strconv.Itoa(-i))
			}
			return args
		},
	}
}

// preload sends p's setup for every key over c, pipelined.
func (p *pattern) preload(c net.Conn, cfg Config) error {
	if p.setup == nil {
		return nil
	}
	c.SetDeadline(time.Now().Add(cfg.Timeout + time.Duration(cfg.Keys)*time.Microsecond*20))
	defer c.SetDeadline(time.Time{})
	rd := newReplyReader(64 << 10)
	const chunk = 256
	for start := 0; start < cfg.Keys+1; start += chunk {
		var buf []byte
		n := 0
		for k := start; k < min(start+chunk, cfg.Keys+1); k++ {
			key := cfg.KeyPrefix + strconv.Itoa(k)
			if k == cfg.Keys {
				key = cfg.KeyPrefix + "hot"
			}
			q := newRequest(p.setup(key), false, nil)
			buf = append(buf, q.head...)
			n++
		}
		if _, err := c.Write(buf); err != nil {
			return fmt.Errorf("preloading: %w", err)
		}
		for got := 0; got < n; {
			resp, ok, err := rd.next()
			if err != nil {
				return err
			}
			if !ok {
				if err := rd.fill(c); err != nil {
					return fmt.Errorf("preloading: %w", err)
				}
				continue
			}
			if resp.Type == redcon.Error {
				return fmt.Errorf("preloading: %s", resp.Data)
			}
			got++
		}
	}
	return nil
}

// patternSeq is the counter a run's operations draw seq from.
type patternSeq struct{ n atomic.Int64 }
