package replication

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync"
)

// member is what the group knows about one node beyond its Raft address:
// where clients reach it.
type member struct {
	RaftAddr   string
	ClientAddr string
}

// members is the replicated id -> member map. The FSM writes it (member
// entries, snapshot restore); redirects and ClusterView read it.
type members struct {
	mu sync.RWMutex
	m  map[string]member
}

func (ms *members) get(id string) (member, bool) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	m, ok := ms.m[id]
	return m, ok
}

func (ms *members) apply(c memberChange) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = make(map[string]member)
	}
	switch c.op {
	case memberSet:
		ms.m[c.id] = member{RaftAddr: c.raftAddr, ClientAddr: c.clientAddr}
	case memberRemove:
		delete(ms.m, c.id)
	}
}

func (ms *members) snapshot() map[string]member {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	return maps.Clone(ms.m)
}

func (ms *members) replace(m map[string]member) {
	ms.mu.Lock()
	ms.m = m
	ms.mu.Unlock()
}

// Snapshot meta layout: version u8 | count uvarint | (id | raftAddr |
// clientAddr)*, strings as uvarint length | bytes, ids in ascending order
// so that equal maps give equal bytes.
const membersMetaVersion = 1

func encodeMembers(m map[string]member) []byte {
	b := []byte{membersMetaVersion}
	b = binary.AppendUvarint(b, uint64(len(m)))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		b = appendString(b, id)
		b = appendString(b, m[id].RaftAddr)
		b = appendString(b, m[id].ClientAddr)
	}
	return b
}

func decodeMembers(b []byte) (map[string]member, error) {
	if len(b) == 0 {
		return map[string]member{}, nil
	}
	if b[0] != membersMetaVersion {
		return nil, errBadEntry
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errBadEntry
	}
	b = b[k:]
	m := make(map[string]member, n)
	for range n {
		var id string
		var v member
		var err error
		if id, b, err = readString(b); err != nil {
			return nil, err
		}
		if v.RaftAddr, b, err = readString(b); err != nil {
			return nil, err
		}
		if v.ClientAddr, b, err = readString(b); err != nil {
			return nil, err
		}
		m[id] = v
	}
	if len(b) != 0 {
		return nil, errBadEntry
	}
	return m, nil
}

// Snapshot meta, version 2: the members (version 1's encoding, which a
// version 1 meta is alone), then the replicated server state (the ACL
// users) as uvarint length | bytes.
const snapshotMetaVersion = 2

func encodeMeta(m map[string]member, state []byte) []byte {
	b := []byte{snapshotMetaVersion}
	mem := encodeMembers(m)
	b = binary.AppendUvarint(b, uint64(len(mem)))
	b = append(b, mem...)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}

// decodeMeta reads either version; state is nil when the snapshot has none.
func decodeMeta(b []byte) (map[string]member, []byte, error) {
	if len(b) == 0 || b[0] == membersMetaVersion {
		m, err := decodeMembers(b)
		return m, nil, err
	}
	if b[0] != snapshotMetaVersion {
		return nil, nil, errBadEntry
	}
	b = b[1:]
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errBadEntry
		}
		f := b[k : k+int(n)]
		b = b[k+int(n):]
		return f, nil
	}
	mem, err := field()
	if err != nil {
		return nil, nil, err
	}
	state, err := field()
	if err != nil || len(b) != 0 {
		return nil, nil, errBadEntry
	}
	m, err := decodeMembers(mem)
	return m, state, err
}
