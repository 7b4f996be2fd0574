package engine

import (
	"errors"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// MultiKind says how the replies of a multi-key command's sub-commands
// combine. Stored in Raft entries: the values are fixed.
type MultiKind uint8

// How a multi-key command combines replies.
const (
	MultiSum   MultiKind = 0 // DEL, EXISTS, UNLINK, LIMIT.RESET: sum of integer replies
	MultiArray MultiKind = 1 // MGET: array of the sub-replies
	MultiOK    MultiKind = 2 // MSET: OK, all or nothing
)

// Flags modify a command.
type Flags uint16

// Command flags.
const (
	FlagMS       Flags = 1 << iota // decision durations in milliseconds
	FlagNX                         // SET/EXPIRE only if absent / no expiry
	FlagXX                         // SET/EXPIRE only if present / has expiry
	FlagGT                         // EXPIRE only if the new expiry is later
	FlagLT                         // EXPIRE only if the new expiry is earlier
	FlagKeepTTL                    // SET keeps the existing expiry
	FlagGet                        // SET replies the old value
	FlagRelative                   // N[0] is a duration from now (EX/PX/EXPIRE), not a timestamp
	FlagReset                      // OpDel as LIMIT.RESET: only limiter keys count
	FlagIntReply                   // SET as SETNX: reply 1 or 0
	// FlagAsWritten: LB.RESERVE's N[0] is the period and N[1] rate<<32 |
	// burst, the parameters as the caller wrote them, rather than the
	// interval and the burst (leaky.go).
	FlagAsWritten
)

// Command is one parsed request. Slices alias the connection's read buffer
// and are valid only until the batch's replies are written.
type Command struct {
	Op    Op
	Flags Flags
	// Multi combines the replies of a multi-key command (Sub set on a
	// KeysOne op).
	Multi MultiKind
	Key   []byte
	Value []byte
	// Args are a data-type command's arguments after its key, as the
	// client sent them: the op parses them on the shard owner, in the
	// order Redis checks them, so that which error wins (a syntax error or
	// WRONGTYPE, say) is Redis's.
	Args [][]byte
	// N holds the numeric arguments; each op's constant says which.
	N [4]int64
	// Sub holds, for a multi-key command, the same op once per key; for
	// LIMIT.ALL, the decisions.
	Sub []Command
	// Pattern filters OpKeys/OpScan; TypeFilter filters OpScan.
	Pattern    []byte
	TypeFilter []byte
	// ReqID is a decision's request id (REQID; receipts.go): a retry with
	// the same id on the same key within ReqTTL ns gets the first reply and
	// changes nothing. The server stamps ReqTTL, so a replay or a replica
	// keeps each receipt exactly as long as the node that decided.
	ReqID  []byte
	ReqTTL int64
	hash   uint64
}

// ReplyKind says which fields of a Reply are set.
type ReplyKind uint8

// Reply kinds.
const (
	ReplyNil      ReplyKind = iota // RESP nil bulk
	ReplyOK                        // +OK
	ReplyInt                       // Int
	ReplyBulk                      // Bulk (bytes) or Str (text)
	ReplyDecision                  // Dec, the 5-field decision array
	ReplyError                     // Err
	ReplyArray                     // Items
	ReplyMap                       // Items as field/value pairs (flat array in RESP2)
	ReplyNilArray                  // RESP nil array
	ReplyStatus                    // Str as a simple string (+...)
	ReplySet                       // Items as a set (an array in RESP2)
	ReplyDouble                    // Float, as Redis formats a double (%.17g); a bulk string in RESP2
	// ReplyPairs is Items as member, score, member, score...: a flat array
	// in RESP2, an array of [member, double] pairs in RESP3 (ZRANGE ...
	// WITHSCORES).
	ReplyPairs
	// ReplyBool is Int 1 or 0 as a RESP3 boolean (#t, #f); :1 or :0 in
	// RESP2 (a script's true and false under redis.setresp(3)).
	ReplyBool
	// ReplyBigNumber is Str as a RESP3 big number (...); a bulk string in
	// RESP2.
	ReplyBigNumber
	// ReplyReservation is Dec as LB.RESERVE's 4-field array: admitted
	// (not Limited), wait (RetryAfter), queue depth (Remaining) and
	// reset_after (ResetAfter), the durations rounded up to whole seconds
	// (SecondsCeil) or, with MS, milliseconds. A decision in all but name,
	// kept in Dec so that it costs no allocation either.
	ReplyReservation
)

// Reply is one command's answer. Bulk aliases a batch-owned buffer and is
// valid until the batch is reused.
type Reply struct {
	Kind  ReplyKind
	Int   int64
	Bulk  []byte
	Str   string
	Dec   ratelimit.Decision
	MS    bool // Dec durations in milliseconds rather than seconds
	Float float64
	Err   error
	Items []Reply
	// unchanged: a write that succeeded without changing anything (SET
	// NX on an existing key), so there is nothing to journal or to signal
	// to WATCH.
	unchanged bool
}

func errReply(err error) Reply   { return Reply{Kind: ReplyError, Err: err} }
func intReply(n int64) Reply     { return Reply{Kind: ReplyInt, Int: n} }
func strReply(s string) Reply    { return Reply{Kind: ReplyBulk, Str: s} }
func bulkReply(b []byte) Reply   { return Reply{Kind: ReplyBulk, Bulk: b} }
func okReply() Reply             { return Reply{Kind: ReplyOK} }
func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }
func nilReply() Reply            { return Reply{Kind: ReplyNil} }
func decReply(d ratelimit.Decision, f Flags) Reply {
	return Reply{Kind: ReplyDecision, Dec: d, MS: f&FlagMS != 0}
}

// RawError is an error whose text is a whole RESP error line, code
// included ("ERR ...", "WRONGTYPE ...", a script's error_reply): the
// server sends it as it is. Scripts produce these, because a script's
// errors reach the client with the text Redis would give them.
type RawError string

func (e RawError) Error() string { return string(e) }

// Errors the engine returns. They carry no RESP error codes: the server's
// errors.go alone turns them into Redis's error text.
var (
	ErrWrongType = errors.New("operation against a key holding the wrong kind of value")
	ErrOOM       = errors.New("command not allowed when used memory > 'maxmemory'")
	ErrOverflow  = errors.New("increment or decrement would overflow")
	// ErrLimiterExpiry: a limiter's expiry is its reset time, derived from
	// its state; letting EXPIRE move it would hand out or withhold quota.
	ErrLimiterExpiry = errors.New("a rate limiter key expires at its reset time; use LIMIT.RESET to forget it")
	ErrExpireTime    = errors.New("invalid expire time")
	ErrSameKeyTwice  = errors.New("LIMIT.ALL names the same key twice; combine the costs into one limit")
	ErrClosed        = errors.New("server is shutting down")
)

// Batch is a pipeline's worth of commands and their replies. A connection
// keeps one Batch and reuses it, so executing a pipeline allocates nothing
// in steady state. Not safe for concurrent use.
type Batch struct {
	Cmds    []Command
	Replies []Reply

	now int64
	// ReadOnly is set for connections that sent READONLY: in cluster mode a
	// follower may then answer reads from its own applied state.
	ReadOnly bool
	// Replicated is set by a replicated log's state machine: every node
	// runs these commands, so none may end differently on one node (a
	// script is not killed on one node alone).
	Replicated bool

	// replaying marks a batch rebuilt from the journal: it bypasses
	// maxmemory and is not journaled again.
	replaying bool
	durable   uint64 // highest journal seq the batch appended
	// journalFailed: a record of a change could not be appended.
	journalFailed bool
	jobs          []shardJob
	used          []int // shards with work in the current segment
	wg            sync.WaitGroup
}

// Reset empties the batch for the next pipeline, keeping its capacity.
func (b *Batch) Reset() {
	b.Cmds = b.Cmds[:0]
	b.Replies = b.Replies[:0]
	for i := range b.jobs {
		b.jobs[i].idx = b.jobs[i].idx[:0]
		b.jobs[i].buf = b.jobs[i].buf[:0]
		b.jobs[i].resetItems()
	}
}

// JournalSeq is the highest journal sequence the last Execute of this batch
// appended, 0 when it journaled nothing: what a durable wrapper waits for
// before the replies may be sent.
func (b *Batch) JournalSeq() uint64 { return b.durable }

// JournalFailed reports that the last Execute could not append a record
// of a change it made: that change holds in memory only.
func (b *Batch) JournalFailed() bool { return b.journalFailed }

// FailWrites replaces the replies of the batch's writes that did not fail
// with err: they were applied but cannot be promised durable, so the client
// must not be told they succeeded.
//
// A write whose reply says it changed nothing (a refused decision, SET NX
// of an existing key) keeps its reply: there was nothing to persist.
func (b *Batch) FailWrites(err error) {
	for i := range b.Replies {
		c, r := &b.Cmds[i], &b.Replies[i]
		if !c.Writes() || r.Kind == ReplyError {
			continue
		}
		if ch := c.Op.spec().changed; ch != nil && !ch(c, r) {
			continue
		}
		b.Replies[i] = errReply(err)
	}
}

// Add appends a command slot and returns it for the caller to fill.
func (b *Batch) Add() *Command {
	if len(b.Cmds) < cap(b.Cmds) {
		b.Cmds = b.Cmds[:len(b.Cmds)+1]
		c := &b.Cmds[len(b.Cmds)-1]
		sub, args := c.Sub[:0], c.Args[:0]
		*c = Command{Sub: sub, Args: args}
		return c
	}
	b.Cmds = append(b.Cmds, Command{})
	return &b.Cmds[len(b.Cmds)-1]
}
