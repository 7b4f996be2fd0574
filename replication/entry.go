package replication

import (
	"encoding/binary"
	"errors"

	"github.com/sluicehq/sluice/engine"
)

// Raft entry layout. The first byte says what the entry is:
//
//	entryBatch:  kind u8 | now varint | origin u64 LE | seq uvarint | flags u8 | engine.EncodeCommands(writes)
//	entryMember: kind u8 | op u8 | id | raftAddr | clientAddr   (strings: uvarint length | bytes)
//	entryState:  kind u8 | change (Config.State's own encoding)
//
// now is the leader's clock reading for the whole entry (unix ns). origin
// and seq name the proposal on the node that made it, so that node's FSM
// can hand the replies to the waiting connections; origin is random per
// process, so a restarted node never mistakes an old entry for its own.
// A new kind gets a new first byte; an FSM that meets a kind it does not
// know logs it and skips it (see DESIGN.md, "Entries").
const (
	entryBatch  byte = 1
	entryMember byte = 2
	// entryState: kind u8 | a change to Config.State (the server's ACL
	// users), opaque here.
	entryState byte = 3
)

// Batch entry flags.
const (
	// flagOverMemory: the leader was past maxmemory when it stamped the
	// entry, so every node refuses to create state while applying it.
	flagOverMemory byte = 1 << iota
)

// Member entry operations.
const (
	memberSet    byte = 1
	memberRemove byte = 2
)

var errBadEntry = errors.New("replication: malformed raft entry")

// batchHeader is the fixed part of an entryBatch.
type batchHeader struct {
	now    int64
	origin uint64
	seq    uint64
	flags  byte
}

func appendBatchHeader(buf []byte, h batchHeader) []byte {
	buf = append(buf, entryBatch)
	buf = binary.AppendVarint(buf, h.now)
	buf = binary.LittleEndian.AppendUint64(buf, h.origin)
	buf = binary.AppendUvarint(buf, h.seq)
	return append(buf, h.flags)
}

// decodeBatchHeader parses an entryBatch's header and returns the encoded
// commands that follow it.
func decodeBatchHeader(b []byte) (batchHeader, []byte, error) {
	var h batchHeader
	if len(b) == 0 || b[0] != entryBatch {
		return h, nil, errBadEntry
	}
	b = b[1:]
	var n int
	if h.now, n = binary.Varint(b); n <= 0 {
		return h, nil, errBadEntry
	}
	b = b[n:]
	if len(b) < 8 {
		return h, nil, errBadEntry
	}
	h.origin = binary.LittleEndian.Uint64(b)
	b = b[8:]
	if h.seq, n = binary.Uvarint(b); n <= 0 {
		return h, nil, errBadEntry
	}
	b = b[n:]
	if len(b) == 0 {
		return h, nil, errBadEntry
	}
	h.flags = b[0]
	return h, b[1:], nil
}

// decodeBatch parses a whole entryBatch, appending its commands to into.
// The commands alias b.
func decodeBatch(b []byte, into []engine.Command) (batchHeader, []engine.Command, error) {
	h, rest, err := decodeBatchHeader(b)
	if err != nil {
		return h, into, err
	}
	into, rest, err = engine.DecodeCommands(rest, into)
	if err != nil {
		return h, into, err
	}
	if len(rest) != 0 {
		return h, into, errBadEntry
	}
	return h, into, nil
}

// memberChange is an entryMember.
type memberChange struct {
	op         byte
	id         string
	raftAddr   string
	clientAddr string
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, errBadEntry
	}
	b = b[k:]
	return string(b[:n]), b[n:], nil
}

func encodeMember(m memberChange) []byte {
	b := make([]byte, 0, 2+len(m.id)+len(m.raftAddr)+len(m.clientAddr)+3*binary.MaxVarintLen16)
	b = append(b, entryMember, m.op)
	b = appendString(b, m.id)
	b = appendString(b, m.raftAddr)
	return appendString(b, m.clientAddr)
}

func decodeMember(b []byte) (memberChange, error) {
	var m memberChange
	if len(b) < 2 || b[0] != entryMember || (b[1] != memberSet && b[1] != memberRemove) {
		return m, errBadEntry
	}
	m.op = b[1]
	b = b[2:]
	var err error
	if m.id, b, err = readString(b); err != nil {
		return m, err
	}
	if m.raftAddr, b, err = readString(b); err != nil {
		return m, err
	}
	if m.clientAddr, b, err = readString(b); err != nil {
		return m, err
	}
	if len(b) != 0 || m.id == "" {
		return m, errBadEntry
	}
	return m, nil
}
