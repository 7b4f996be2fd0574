package engine

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/shard"
)

// Set algebra: SINTER, SUNION, SDIFF and SINTERCARD read several sets at
// once, their STORE forms and SMOVE write one or two; all run with every
// key's shard held. Results come in the first set's insertion order where
// Redis's come in hash table order: no client may rely on either
// (nondeterministic_output_order). A write is the SETs' own ops (DEL and
// SADD, SREM), journaled as such, checked before anything changes.

const (
	OpSetAlgebra      Op = 97 // N[0] = SetInter|SetUnion|SetDiff, N[1] = 1: the cardinality only, up to N[2] (0: all); Sub = the sets
	OpSetAlgebraStore Op = 98 // N[0] as OpSetAlgebra; Sub[0] = the destination, Sub[1:] = the sets
	OpSMove           Op = 99 // SMOVE: Sub = source, destination; Value = the member
)

// Set algebra modes, in N[0].
const (
	SetInter int64 = iota
	SetUnion
	SetDiff
)

func setAlgebraOps() map[Op]OpSpec {
	never := func(*Command, *Reply) bool { return false } // their inner ops journal
	return map[Op]OpSpec{
		OpSetAlgebra:      {Name: "setalgebra", Keys: KeysHeld, applyHeld: (*heldRun).setAlgebra},
		OpSetAlgebraStore: {Name: "setalgebrastore", Writes: true, Creates: true, Keys: KeysHeld, changed: never, applyHeld: (*heldRun).setAlgebraStore},
		// SMOVE is no denyoom command in Redis: a move creates no state.
		OpSMove: {Name: "smove", Writes: true, Keys: KeysHeld, changed: never, applyHeld: (*heldRun).smove},
	}
}

// setMembersOf reads each key's set: nil for a missing key, a copy of its
// members (in the batch's memory: they outlive any write the command
// then makes), WRONGTYPE if any key holds something else, as Redis checks
// every key before it computes.
func (x *heldRun) setMembersOf(keys []Command) ([][][]byte, bool, error) {
	sets := make([][][]byte, len(keys))
	anyMissing := false
	for i := range keys {
		t, j := x.on(&keys[i])
		e, ok, err := collection(t, &keys[i], x.now, shard.KindSet)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			anyMissing = true
			continue
		}
		members := make([][]byte, 0, collCount(e.Payload))
		for it := iterStrings(e.Payload); it.more(); {
			members = append(members, j.copyOut(it.next()))
		}
		sets[i] = members
	}
	return sets, anyMissing, nil
}

// combineSets computes mode over sets, stopping at limit members (0: no
// limit).
func combineSets(mode int64, sets [][][]byte, anyMissing bool, limit int64) [][]byte {
	var out [][]byte
	full := func() bool { return limit > 0 && int64(len(out)) >= limit }
	index := func(members [][]byte) map[string]struct{} {
		m := make(map[string]struct{}, len(members))
		for _, s := range members {
			m[string(s)] = struct{}{}
		}
		return m
	}
	switch mode {
	case SetInter:
		if anyMissing {
			return nil
		}
		others := make([]map[string]struct{}, len(sets)-1)
		for i, s := range sets[1:] {
			others[i] = index(s)
		}
	members:
		for _, m := range sets[0] {
			for _, o := range others {
				if _, ok := o[string(m)]; !ok {
					continue members
				}
			}
			if out = append(out, m); full() {
				break
			}
		}
	case SetUnion:
		seen := map[string]struct{}{}
		for _, s := range sets {
			for _, m := range s {
				if _, ok := seen[string(m)]; !ok {
					seen[string(m)] = struct{}{}
					out = append(out, m)
				}
			}
		}
	case SetDiff:
		others := make([]map[string]struct{}, len(sets)-1)
		for i, s := range sets[1:] {
			others[i] = index(s)
		}
	diff:
		for _, m := range sets[0] {
			for _, o := range others {
				if _, ok := o[string(m)]; ok {
					continue diff
				}
			}
			out = append(out, m)
		}
	}
	return out
}

func (x *heldRun) setAlgebra(c *Command) Reply {
	sets, anyMissing, err := x.setMembersOf(c.Sub)
	if err != nil {
		return errReply(err)
	}
	out := combineSets(c.N[0], sets, anyMissing, c.N[2])
	if c.N[1] == 1 {
		return intReply(int64(len(out)))
	}
	items := make([]Reply, len(out))
	for i, m := range out {
		items[i] = bulkReply(m)
	}
	return Reply{Kind: ReplySet, Items: items}
}

// setPayloadFits reports whether a set of members under key fits a record.
func setPayloadFits(key []byte, members [][]byte, extra int) bool {
	n := collHeader + extra
	var buf [binary.MaxVarintLen64]byte
	for _, m := range members {
		n += binary.PutUvarint(buf[:], uint64(len(m))) + len(m)
	}
	return shard.Fits(len(key), n)
}

// setAlgebraStore: SINTERSTORE, SUNIONSTORE, SDIFFSTORE. The destination
// is replaced whatever it held (and loses any expiry), or deleted when the
// result is empty; the reply is the result's size.
func (x *heldRun) setAlgebraStore(c *Command) Reply {
	dst := &c.Sub[0]
	sets, anyMissing, err := x.setMembersOf(c.Sub[1:])
	if err != nil {
		return errReply(err)
	}
	out := combineSets(c.N[0], sets, anyMissing, 0)
	if len(out) > 0 {
		if !setPayloadFits(dst.Key, out, 0) {
			return errReply(shard.ErrTooLarge)
		}
		if err := x.createAllOrNone(dst.hash); err != nil {
			return errReply(err)
		}
		defer x.setCommitting(false)
	}
	x.run(&Command{Op: OpDel, Key: dst.Key, hash: dst.hash})
	if len(out) > 0 {
		x.run(&Command{Op: OpSAdd, Key: dst.Key, hash: dst.hash, Args: out})
	}
	return intReply(int64(len(out)))
}

// smove: SMOVE source destination member, as Redis 7.0: 0 when the source
// is missing (whatever the destination holds), WRONGTYPE for either key
// holding another kind, then the member moved if the source has it.
func (x *heldRun) smove(c *Command) Reply {
	src, dst := &c.Sub[0], &c.Sub[1]
	ts, _ := x.on(src)
	se, sok, serr := collection(ts, src, x.now, shard.KindSet)
	if serr == nil && !sok {
		return intReply(0)
	}
	if serr != nil {
		return errReply(serr)
	}
	td, _ := x.on(dst)
	de, dok, derr := collection(td, dst, x.now, shard.KindSet)
	if derr != nil {
		return errReply(derr)
	}
	if !setHas(se.Payload[collHeader:], c.Value) {
		return intReply(0)
	}
	if string(src.Key) == string(dst.Key) {
		return intReply(1)
	}
	member := [][]byte{c.Value}
	if !dok || !setHas(de.Payload[collHeader:], c.Value) {
		var have []byte
		if dok {
			have = de.Payload[collHeader:]
		}
		if !setPayloadFits(dst.Key, member, len(have)) {
			return errReply(shard.ErrTooLarge)
		}
		// What the destination gains the source loses: maxmemory does
		// not refuse it (as Redis, where SMOVE is not denyoom).
		x.setCommitting(true)
		defer x.setCommitting(false)
	}
	x.run(&Command{Op: OpSRem, Key: src.Key, hash: src.hash, Args: member})
	x.run(&Command{Op: OpSAdd, Key: dst.Key, hash: dst.hash, Args: member})
	return intReply(1)
}
