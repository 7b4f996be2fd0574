package clientlib

import (
	"sync"
	"time"
)

// decimalArg is a pre-formatted argument. go-redis writes an
// encoding.BinaryMarshaler's bytes as they are, and a pointer boxes into an
// interface without allocating, so a period travels without a string.
type decimalArg struct {
	buf [32]byte
	n   int
}

func (d *decimalArg) MarshalBinary() ([]byte, error) { return d.buf[:d.n], nil }

func (d *decimalArg) set(p time.Duration) { d.n = len(appendSeconds(d.buf[:0], p)) }

// decisionArgs holds one decision command's arguments. Every argument is a
// pointer into this struct (go-redis writes *string and *int64 as their
// values), so building the command allocates nothing; the struct itself is
// pooled. The key stays a *string because go-redis's cluster routing reads
// the key argument only from a string or *string.
//
// Reuse requires that nothing keeps cmd.Args() past the call: go-redis
// finishes with them before Process returns, and a user's Hook must not
// retain them either (see the package doc).
type decisionArgs struct {
	args   [9]interface{}
	key    string
	nums   [3]int64
	period decimalArg
	reqID  reqIDArg
}

// familyCommand holds the command names already boxed: boxing a string
// variable allocates, boxing one of these does not.
var familyCommand = [...]interface{}{cmdThrottle, cmdSW, cmdSL, cmdFW}

var decisionPool = sync.Pool{New: func() any { return new(decisionArgs) }}

// fill lays out CL.THROTTLE key max_burst count period quantity MS REQID
// id, or XX.CHECK key limit window cost MS REQID id, with a.reqID already
// set. A peek (cost 0) reads, and goes without an id.
func (a *decisionArgs) fill(l Limit, key string, cost int64) []interface{} {
	a.key = key
	a.period.set(l.Period)
	n := 6
	if l.Family == FamilyGCRA {
		a.nums = [3]int64{l.burst() - 1, l.Rate, cost}
		a.args = [9]interface{}{cmdThrottle, &a.key, &a.nums[0], &a.nums[1], &a.period, &a.nums[2], "MS"}
		n = 7
	} else {
		a.nums = [3]int64{l.Rate, cost, 0}
		a.args = [9]interface{}{familyCommand[l.Family], &a.key, &a.nums[0], &a.period, &a.nums[1], "MS"}
	}
	if cost > 0 {
		a.args[n], a.args[n+1] = "REQID", &a.reqID
		n += 2
	}
	return a.args[:n]
}

// release drops references the pool would otherwise keep alive.
func (a *decisionArgs) release() {
	a.key = ""
	decisionPool.Put(a)
}
