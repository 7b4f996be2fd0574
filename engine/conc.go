package engine

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/sluicehq/sluice/shard"
)

// CONC.ACQUIRE, CONC.RELEASE and CONC.RENEW: concurrency limits (leases).
//
// A key holds at most max leases at once. Each lease stores its own
// absolute expiry, and a lease whose expiry has passed is not held, whether
// or not anything has removed it yet: a holder that dies frees its slot
// exactly at its lease's end, and no answer depends on a sweep. Expired
// leases are dropped from the record only by commands that change it (an
// acquisition, a release or a renewal, which are journaled), so the bytes
// of a record are the same on every node that applied the same commands.
// The record's expiry is its latest lease's, so the key vanishes when the
// last lease ends.

// Op numbers of the concurrency family.
const (
	OpConcAcquire Op = 31 // CONC.ACQUIRE: N = max, lease (ns); Value = the id (none: the engine makes one)
	OpConcRelease Op = 32 // CONC.RELEASE: Value = the id
	OpConcRenew   Op = 33 // CONC.RENEW: N[0] = lease (ns); Value = the id
)

// ErrConcRefund: LIMIT.REFUND has nothing to give back on a concurrency key.
var ErrConcRefund = errors.New("LIMIT.REFUND does not apply to a concurrency key; release the lease with CONC.RELEASE")

func concOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		// A decision (it may appear in LIMIT.ALL) without a cost: it is
		// counted by its own counters, never as allowed or limited.
		OpConcAcquire: {Name: "conc.acquire", Writes: true, Decision: true, Creates: true, Keys: KeysOne, changed: acquired, apply: (*shardJob).concAcquire},
		OpConcRelease: {Name: "conc.release", Writes: true, Keys: KeysOne, changed: positive, apply: (*shardJob).concRelease},
		OpConcRenew:   {Name: "conc.renew", Writes: true, Keys: KeysOne, changed: positive, apply: (*shardJob).concRenew},
	}
}

// acquired: an ACQUIRE changed state when it took or renewed a lease; a
// refusal changes nothing.
func acquired(_ *Command, r *Reply) bool {
	return r.Kind == ReplyArray && len(r.Items) == 4 && r.Items[0].Int == 1
}

// concLeases is a concurrency record's payload (little-endian):
//
//	max | serial | count | capacity x (expiry int64, id hash 7 bytes)
//
// max is the limit the last acquisition gave; serial numbers the ids the
// engine makes; count is how many slots are in use, live or expired, in
// the order the leases were first taken. A lease is known by a 56-bit
// xxhash of its id, so that a slot is 15 bytes whatever the id's length
// and 65536 leases fit one 1 MiB record; two ids with one hash (about
// holders/2^56 for each new id) would name one lease. The hash is stored:
// changing the function would orphan every stored lease.
type concLeases struct{ b []byte }

const (
	concHeader = 24
	concSlot   = 15
	concIDMask = 1<<56 - 1
	// MaxConcLimit bounds max: the memory of a key is bounded by it.
	MaxConcLimit = 65536
	// MaxConcIDLen bounds a lease id.
	MaxConcIDLen = 64
)

func concHash(id []byte) uint64 { return xxhash.Sum64(id) & concIDMask }

func (s concLeases) limit() int64  { return getI(s.b, 0) }
func (s concLeases) serial() int64 { return getI(s.b, 1) }
func (s concLeases) capacity() int { return max(len(s.b)-concHeader, 0) / concSlot }

// count is the slots in use, never more than the payload holds (a damaged
// record must not send an index out of range).
func (s concLeases) count() int {
	if len(s.b) < concHeader {
		return 0
	}
	return int(min(max(getI(s.b, 2), 0), int64(s.capacity())))
}

func (s concLeases) setLease(i int, expiry int64, id uint64) {
	p := s.b[concHeader+i*concSlot : concHeader+(i+1)*concSlot]
	// The hash first: the expiry then overwrites the byte they share.
	binary.LittleEndian.PutUint64(p[7:], id<<8)
	binary.LittleEndian.PutUint64(p[:8], uint64(expiry))
}

// concState is what a record holds at now: its live leases, the earliest
// and latest live expiry (0 when none), and the slot of the live lease
// with the id asked about (-1 when none).
type concState struct {
	live        int
	first, last int64
	found       int
}

// slots are the record's slots in use.
func (s concLeases) slots() []byte { return s.b[concHeader : concHeader+s.count()*concSlot] }

// slotExpiry and slotID read a slot: the id hash is the top 7 bytes of the
// 8 that end it (the first of those is the expiry's last).
func slotExpiry(p []byte) int64 { return int64(binary.LittleEndian.Uint64(p[:8])) }
func slotID(p []byte) uint64    { return binary.LittleEndian.Uint64(p[7:15]) >> 8 }

// state reads the record at now in one pass, looking for the live lease
// with id hash id (found). The loops over slots are a command's whole
// cost at a high max: they walk the bytes rather than index them.
func (s concLeases) state(now int64, id uint64) concState {
	st := concState{found: -1, first: math.MaxInt64}
	body := s.slots()
	for i, off := 0, 0; off < len(body); i, off = i+1, off+concSlot {
		p := body[off : off+concSlot]
		exp := slotExpiry(p)
		if exp <= now {
			continue
		}
		st.live++
		st.first = min(st.first, exp)
		st.last = max(st.last, exp)
		if slotID(p) == id {
			st.found = i
		}
	}
	if st.live == 0 {
		st.first = 0
	}
	return st
}

// holds reports whether a live lease has id hash h.
func (s concLeases) holds(now int64, h uint64) bool {
	body := s.slots()
	for off := 0; off < len(body); off += concSlot {
		if p := body[off : off+concSlot]; slotExpiry(p) > now && slotID(p) == h {
			return true
		}
	}
	return false
}

// compact drops the expired leases, keeping the others in order, and sets
// slot at's expiry to to (0 drops it; at -1 names no slot). It returns
// the earliest and latest expiry kept (0 when none).
func (s concLeases) compact(now int64, at int, to int64) (first, last int64) {
	body := s.slots()
	first, kept := math.MaxInt64, 0
	for i, off := 0, 0; off < len(body); i, off = i+1, off+concSlot {
		exp := slotExpiry(body[off:])
		if i == at {
			exp = to
		}
		if exp <= now {
			continue
		}
		dst := body[kept : kept+concSlot]
		if kept != off {
			copy(dst, body[off:off+concSlot])
		}
		if i == at {
			// The expiry's 8 bytes leave the hash's 7 alone.
			binary.LittleEndian.PutUint64(dst, uint64(exp))
		}
		first, last = min(first, exp), max(last, exp)
		kept += concSlot
	}
	putI(s.b, 2, int64(kept/concSlot))
	if kept == 0 {
		first = 0
	}
	return first, last
}

// concNewID is the id the engine makes for an acquisition without one:
// the time and the key's next serial, "<now ns>-<serial>". It depends only
// on the state and now, so a replay or a replica makes the same; the time
// keeps it apart from the ids of an earlier life of the key, whose serials
// started from 1 too. With check, serials whose id a live lease already
// has (a client chose it) are passed over.
func concNewID(s concLeases, serial, now int64, check bool) ([]byte, int64) {
	for {
		serial++
		id := strconv.AppendInt(make([]byte, 0, 24), now, 10)
		id = append(id, '-')
		id = strconv.AppendInt(id, serial, 10)
		if !check || !s.holds(now, concHash(id)) {
			return id, serial
		}
	}
}

// concReply is ACQUIRE's [acquired, lease_id, holders, next_expiry_ms]. A
// refusal also sets Dec.Limited, which is how LIMIT.ALL sees a trip.
func concReply(ok bool, id Reply, holders int, first, now int64) Reply {
	acquired, next := int64(0), int64(0)
	if ok {
		acquired = 1
	}
	if holders > 0 {
		next = MillisRoundedUp(first - now)
	}
	r := Reply{Kind: ReplyArray, Items: []Reply{intReply(acquired), id, intReply(int64(holders)), intReply(next)}}
	r.Dec.Limited = !ok
	return r
}

func (j *shardJob) concAcquire(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindConcurrency)
	if err != nil {
		return errReply(err)
	}
	limit, expiry := c.N[0], now+c.N[1]
	s := concLeases{e.Payload}
	var serial int64
	if ok {
		serial = s.serial()
	}
	// Without an id, the one to make is known before the record is read,
	// so one pass also finds whether a live lease already has it.
	id, generated := c.Value, len(c.Value) == 0
	if generated {
		id, serial = concNewID(s, serial, now, false)
	}
	h := concHash(id)
	st := concState{found: -1}
	if ok {
		st = s.state(now, h)
	}
	if generated && st.found >= 0 {
		id, serial = concNewID(s, serial, now, true)
		h, st.found = concHash(id), -1
	}
	if st.found < 0 && int64(st.live) >= limit {
		// Full (a lowered max lets nobody in until the holders are under
		// it); nothing changes, expired leases included.
		if !j.dryRun {
			j.e.stats[j.shard].leasesRefused.Add(1)
		}
		return concReply(false, nilReply(), st.live, st.first, now)
	}
	if j.dryRun {
		return j.concWouldAcquire(s, c, e, ok, st, id, now)
	}
	switch {
	case e.Payload == nil:
		if e, err = j.create(t, c, shard.KindConcurrency, expiry, concHeader+concSlot); err != nil {
			return errReply(err)
		}
	case !ok:
		// An expired record of this family: a new life, in place.
		if e, err = t.Resize(e, concHeader+concSlot); err != nil {
			return errReply(err)
		}
		clear(e.Payload)
	case st.found < 0 && st.live+1 > s.capacity():
		// Grown before anything changes, so a record that cannot grow
		// (ErrTooLarge, a long key at a high max) is left as it was. It
		// doubles, up to max: memory stays bounded by the limit.
		grown := min(max(2*s.capacity(), 1), int(limit))
		if e, err = t.Resize(e, concHeader+concSlot*grown); err != nil {
			return errReply(err)
		}
	}
	s = concLeases{e.Payload}
	var first, last int64
	if st.found < 0 && st.live == s.count() {
		// Nothing has expired, so no slot moves: the pass above found the
		// bounds, and the new lease goes at the end.
		first, last = st.first, st.last
	} else {
		first, last = s.compact(now, st.found, expiry)
	}
	holders := st.live
	if st.found < 0 {
		s.setLease(holders, expiry, h)
		putI(s.b, 2, int64(holders+1))
		holders++
		if first == 0 || expiry < first {
			first = expiry
		}
		last = max(last, expiry)
	}
	putI(s.b, 0, limit)
	putI(s.b, 1, serial)
	e = j.concShrink(t, e)
	t.SetExpireAt(e, last)
	j.e.stats[j.shard].leasesAcquired.Add(1)
	// A copy: the command's bytes belong to the connection's buffer.
	return concReply(true, strReply(string(id)), holders, first, now)
}

// concWouldAcquire is LIMIT.ALL's dry run of an acquisition that is not
// refused: the reply it would give, and the error the commit would meet
// (which must then not happen: a commit that fails applies the limits in
// part), with nothing written.
func (j *shardJob) concWouldAcquire(s concLeases, c *Command, e shard.Entry, ok bool, st concState, id []byte, now int64) Reply {
	expiry := now + c.N[1]
	if err := j.dryRunCreate(e.Payload == nil); err != nil {
		return errReply(err)
	}
	if ok && st.found < 0 && st.live+1 > s.capacity() {
		grown := min(max(2*s.capacity(), 1), int(c.N[0]))
		if !shard.Fits(len(c.Key), concHeader+concSlot*grown) {
			return errReply(shard.ErrTooLarge)
		}
	}
	holders, first := st.live, expiry
	if ok {
		// The earliest end among the leases that stay as they are.
		body := s.slots()
		for i, off := 0, 0; off < len(body); i, off = i+1, off+concSlot {
			if exp := slotExpiry(body[off:]); exp > now && i != st.found {
				first = min(first, exp)
			}
		}
	}
	if st.found < 0 {
		holders++
	}
	return concReply(true, strReply(string(id)), holders, first, now)
}

// concShrink halves a compacted record's slots while a quarter would hold
// its leases, so that a key that once held many gives the memory back.
// A failed shrink (storage exhausted) keeps the larger record: it only
// costs memory.
func (j *shardJob) concShrink(t *shard.Table, e shard.Entry) shard.Entry {
	s := concLeases{e.Payload}
	slots := s.capacity()
	for slots > 1 && s.count() <= slots/4 {
		slots /= 2
	}
	if slots == s.capacity() {
		return e
	}
	if ne, err := t.Resize(e, concHeader+concSlot*slots); err == nil {
		return ne
	}
	return e
}

// concLookup finds the live lease with c's id: 1 and its slot, or a reply
// that ends the command (0, or WRONGTYPE).
func concLookup(t *shard.Table, c *Command, now int64) (shard.Entry, int, *Reply) {
	e, ok, err := lookup(t, c, now, shard.KindConcurrency)
	if err != nil {
		r := errReply(err)
		return e, -1, &r
	}
	if !ok {
		r := intReply(0)
		return e, -1, &r
	}
	st := concLeases{e.Payload}.state(now, concHash(c.Value))
	if st.found < 0 {
		r := intReply(0)
		return e, -1, &r
	}
	return e, st.found, nil
}

func (j *shardJob) concRelease(t *shard.Table, c *Command, now int64) Reply {
	e, found, r := concLookup(t, c, now)
	if r != nil {
		return *r
	}
	if _, last := (concLeases{e.Payload}).compact(now, found, 0); last != 0 {
		e = j.concShrink(t, e)
		t.SetExpireAt(e, last)
	} else {
		t.Delete(e)
	}
	return intReply(1)
}

func (j *shardJob) concRenew(t *shard.Table, c *Command, now int64) Reply {
	e, found, r := concLookup(t, c, now)
	if r != nil {
		return *r
	}
	_, last := concLeases{e.Payload}.compact(now, found, now+c.N[0])
	e = j.concShrink(t, e)
	t.SetExpireAt(e, last)
	return intReply(1)
}

func concInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	s := concLeases{e.Payload}
	st := s.state(now, 0)
	field("max", intReply(s.limit()))
	field("holders", intReply(int64(st.live)))
	next := int64(0)
	if st.live > 0 {
		next = MillisRoundedUp(st.first - now)
	}
	field("next_expiry_ms", intReply(next))
}
