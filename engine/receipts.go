package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// Receipts: idempotent decisions (REQID). A decision sent with a request id
// leaves a receipt, the reply it got, on its key's shard for Command.ReqTTL;
// a retry with the same id on the same key within that time gets the
// receipt's reply and changes nothing. A client whose connection dropped
// before the reply arrived can therefore ask again without being charged
// twice.
//
// Receipts live in the shard table's side table (shard.Table.Side), so they
// are cloned into snapshots, swept when they expire, counted in used memory
// and cleared by FLUSHALL with the keys, without being keys themselves: no
// KEYS, SCAN or DBSIZE sees them. A receipt is state like any other: a
// decision that leaves one is journaled and replicated with its id (even
// when it was refused), and a replica or a replay stores the same receipt
// with the same expiry, so a retry after a failover or a restart finds it.
// Receipts are never refused for maxmemory: the decision they record was
// made, and whether a retry is charged must not depend on one node's
// memory figure.

// DefaultReqIDWindow is how long a receipt is kept unless the server says
// otherwise (reqid-window): long enough for a client's retry after a
// timeout, a reconnect or a cluster failover, short enough that receipts
// cost little memory (about 100 bytes each with clientlib's 32-byte ids,
// index and page slack included, so 100k decisions/s with ids hold about
// 100 MB).
const DefaultReqIDWindow int64 = 10e9 // ns

// MaxReqIDWindow bounds reqid-window: an hour.
const MaxReqIDWindow int64 = 3600e9

// MaxReqIDLen bounds a request id: a UUID takes 36 bytes.
const MaxReqIDLen = 64

// ErrReqIDTooLong refuses a request id past MaxReqIDLen.
var ErrReqIDTooLong = errors.New("REQID must be at most 64 bytes")

// OpReceipt stores a receipt by itself: what the journal records for a
// LIMIT.ALL, whose decisions are journaled one by one. Key is the first
// limit's key, Value the encoded reply.
const OpReceipt Op = 30

func receiptOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpReceipt: {Name: "receipt", Writes: true, Keys: KeysOne, Internal: true,
			changed: succeeded, apply: (*shardJob).storeReceipt},
	}
}

// receiptKey is the side-table key of (key, id): the key's length first, so
// that no two pairs share one.
func (j *shardJob) receiptKey(key, id []byte) []byte {
	b := binary.AppendUvarint(j.rkey[:0], uint64(len(key)))
	b = append(append(b, key...), id...)
	j.rkey = b
	return b
}

// onceReceiptKey is the side-table key of a once op's (key, id): the id
// padded to MaxReqIDLen bytes, then its length, so that its id part is
// longer than any decision's can be. A refund and a decision sent with one
// id (a caller's WithRequestID context for both halves of "charge, then
// refund") keep receipts of their own.
func (j *shardJob) onceReceiptKey(key, id []byte) []byte {
	var pad [MaxReqIDLen]byte
	b := j.receiptKey(key, id)
	b = append(b, pad[:MaxReqIDLen-len(id)]...)
	b = append(b, byte(len(id)))
	j.rkey = b
	return b
}

// receiptOwner is the key a side-table record belongs to, for routing it to
// its shard on restore.
func receiptOwner(rk []byte) ([]byte, bool) {
	n, w := binary.Uvarint(rk)
	if w <= 0 || n > uint64(len(rk)-w) {
		return nil, false
	}
	return rk[w : w+int(n)], true
}

// findReceipt returns the live receipt for (key, id), decoded, if any.
func (j *shardJob) findReceipt(t *shard.Table, key, id []byte, now int64) (Reply, bool) {
	side := t.Side(false)
	if side == nil {
		return Reply{}, false
	}
	rk := j.receiptKey(key, id)
	e, ok := side.Get(rk, shard.Hash(rk), now)
	if !ok {
		return Reply{}, false
	}
	return j.readReceipt(e, key)
}

func (j *shardJob) readReceipt(e shard.Entry, key []byte) (Reply, bool) {
	r, rest, err := decodeReceipt(e.Payload)
	if err != nil || len(rest) != 0 {
		// Receipts are written only by putReceipt; a bad one is a bug,
		// and answering the decision afresh is the safe way out.
		j.e.log.Error("engine: unreadable receipt; deciding again", "key", string(key))
		return Reply{}, false
	}
	j.e.stats[j.shard].receiptHits.Add(1)
	return r, true
}

// putReceipt stores r as the receipt for (key, id) until now+ttl.
func (j *shardJob) putReceipt(t *shard.Table, key, id []byte, ttl, now int64, r *Reply) {
	j.rval = appendReceipt(j.rval[:0], r)
	j.storeReceiptBytes(t, key, id, now+ttl, j.rval)
}

func (j *shardJob) storeReceiptBytes(t *shard.Table, key, id []byte, expireAt int64, val []byte) {
	rk := j.receiptKey(key, id)
	e, err := t.Side(true).Insert(rk, shard.Hash(rk), shard.KindReceipt, expireAt, len(val))
	if err != nil {
		// Only a record past a page can fail, and ids and replies are
		// small: logged, and the decision stands without its receipt.
		j.e.log.Error("engine: receipt not stored", "key", string(key), "err", err)
		return
	}
	copy(e.Payload, val)
}

// storeReceipt applies OpReceipt: Value is the encoded reply.
func (j *shardJob) storeReceipt(t *shard.Table, c *Command, now int64) Reply {
	if _, rest, err := decodeReceipt(c.Value); err != nil || len(rest) != 0 {
		return errReply(errBadReceipt)
	}
	j.storeReceiptBytes(t, c.Key, c.ReqID, now+c.ReqTTL, c.Value)
	return okReply()
}

// decideOnce runs a decision that carries a request id: the receipt's reply
// when there is one, else the decision, whose reply then becomes the
// receipt. A peek (cost 0) reads and leaves none. The side table is
// searched once: the decision touches only the key space, so a receipt
// found absent is still absent after it.
func (j *shardJob) decideOnce(t *shard.Table, c *Command, now int64, spec *OpSpec) Reply {
	side := t.Side(true)
	keyOf := j.receiptKey
	if spec.once {
		keyOf = j.onceReceiptKey
	}
	rk := keyOf(c.Key, c.ReqID)
	h := shard.Hash(rk)
	e, found, live := side.Lookup(rk, h, now)
	if found && live {
		if r, ok := j.readReceipt(e, c.Key); ok {
			r.unchanged = true
			return r
		}
	}
	r := spec.apply(j, t, c, now)
	// Decisions keep their reply, a refund the remaining it gave; an error
	// or a refund of nothing (nil: nothing changed; replayed, it is nil
	// again) leaves no receipt, so the id refunds once the key has state.
	if r.Kind != ReplyDecision && r.Kind != ReplyReservation && r.Kind != ReplyInt {
		return r
	}
	if found {
		side.Delete(e) // an expired receipt of the same id
	}
	j.rval = appendReceipt(j.rval[:0], &r)
	rk = keyOf(c.Key, c.ReqID) // the op may have used the buffer's memory
	if e, err := side.InsertAbsent(rk, h, shard.KindReceipt, now+c.ReqTTL, len(j.rval)); err == nil {
		copy(e.Payload, j.rval)
	} else {
		j.e.log.Error("engine: receipt not stored", "key", string(c.Key), "err", err)
	}
	return r
}

// Receipt encoding: the replies decisions and LIMIT.ALL give.
const (
	receiptDecision = 'd' // flags (1 limited, 2 MS, 4 a reservation), limit, remaining, retry_after, reset_after
	receiptInt      = 'i' // varint
	receiptArray    = 'a' // uvarint count, then the items
	receiptBulk     = 's' // uvarint length, then the bytes (a lease id)
	receiptNil      = 'n'
)

// maxReceiptDepth is how deep receipts nest arrays: LIMIT.ALL's reply, its
// list of replies, and a CONC.ACQUIRE's reply in that list.
const maxReceiptDepth = 2

var errBadReceipt = errors.New("malformed receipt")

func appendReceipt(b []byte, r *Reply) []byte {
	switch r.Kind {
	case ReplyDecision, ReplyReservation:
		var flags byte
		if r.Dec.Limited {
			flags |= 1
		}
		if r.MS {
			flags |= 2
		}
		if r.Kind == ReplyReservation {
			flags |= 4
		}
		b = append(b, receiptDecision, flags)
		b = binary.AppendVarint(b, r.Dec.Limit)
		b = binary.AppendVarint(b, r.Dec.Remaining)
		b = binary.AppendVarint(b, r.Dec.RetryAfter)
		return binary.AppendVarint(b, r.Dec.ResetAfter)
	case ReplyInt:
		return binary.AppendVarint(append(b, receiptInt), r.Int)
	case ReplyBulk:
		b = binary.AppendUvarint(append(b, receiptBulk), uint64(len(r.Str)+len(r.Bulk)))
		return append(append(b, r.Str...), r.Bulk...)
	case ReplyNil:
		return append(b, receiptNil)
	case ReplyArray:
		b = binary.AppendUvarint(append(b, receiptArray), uint64(len(r.Items)))
		for i := range r.Items {
			b = appendReceipt(b, &r.Items[i])
		}
		return b
	}
	panic(fmt.Sprintf("engine: no receipt encoding for reply kind %d", r.Kind))
}

func decodeReceipt(b []byte) (Reply, []byte, error) {
	return decodeReceiptAt(b, 0)
}

func decodeReceiptAt(b []byte, depth int) (Reply, []byte, error) {
	r := reader{b: b}
	var out Reply
	switch r.byte() {
	case receiptDecision:
		flags := r.byte()
		out = Reply{Kind: ReplyDecision, MS: flags&2 != 0, Dec: ratelimit.Decision{Limited: flags&1 != 0,
			Limit: r.varint(), Remaining: r.varint(), RetryAfter: r.varint(), ResetAfter: r.varint()}}
		if flags&4 != 0 {
			out.Kind = ReplyReservation
		}
	case receiptInt:
		out = intReply(r.varint())
	case receiptBulk:
		n := r.uvarint()
		if r.err != nil || n > uint64(len(r.b)) {
			return Reply{}, nil, errBadReceipt
		}
		out, r.b = strReply(string(r.b[:n])), r.b[n:]
	case receiptNil:
		out = nilReply()
	case receiptArray:
		n := r.uvarint()
		if r.err != nil || n > uint64(len(r.b)) || depth > maxReceiptDepth {
			return Reply{}, nil, errBadReceipt
		}
		out = Reply{Kind: ReplyArray, Items: make([]Reply, n)}
		for i := range out.Items {
			var err error
			if out.Items[i], r.b, err = decodeReceiptAt(r.b, depth+1); err != nil {
				return Reply{}, nil, err
			}
		}
	default:
		return Reply{}, nil, errBadReceipt
	}
	if r.err != nil {
		return Reply{}, nil, errBadReceipt
	}
	return out, r.b, nil
}
