package server

import (
	"encoding/binary"
	"errors"
	"strings"
)

// In cluster mode the users are replicated state: an ACL change is
// validated here, proposed through the Raft log (the backend's Replicate),
// and applied on every node by Apply, so that every member holds the same
// users; snapshots carry them whole (Snapshot, Restore). Passwords travel
// and are stored only as their SHA-256 hashes.

// Replicator is implemented by a cluster backend: Replicate commits one
// server-state change through the log and returns once this node has
// applied it (through the ACL's Apply). A follower returns the
// *engine.MovedError a write would get.
type Replicator interface {
	Replicate(change []byte) error
}

// ACL change kinds.
const (
	aclChangeSet     byte = 1 // user, then modifiers
	aclChangeDel     byte = 2 // users
	aclChangeReplace byte = 3 // the whole ACL file's text
)

// aclChangeVersion leads every encoded change; a node that meets another
// version refuses the entry rather than guess.
const aclChangeVersion byte = 1

var errBadACLChange = errors.New("malformed ACL change")

func encodeACLChange(kind byte, fields [][]byte) []byte {
	b := []byte{aclChangeVersion, kind}
	b = binary.AppendUvarint(b, uint64(len(fields)))
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func decodeACLChange(b []byte) (byte, [][]byte, error) {
	if len(b) < 2 || b[0] != aclChangeVersion {
		return 0, nil, errBadACLChange
	}
	kind := b[1]
	b = b[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return 0, nil, errBadACLChange
	}
	b = b[k:]
	fields := make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return 0, nil, errBadACLChange
		}
		fields = append(fields, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return 0, nil, errBadACLChange
	}
	return kind, fields, nil
}

// hashedModifiers checks modifiers against the user as it stands (so that
// only changes that will apply go through the log) and returns them with
// every cleartext password (>pw, <pw) replaced by its hash (#h, !h).
func (st *ACL) hashedModifiers(name string, ops [][]byte) ([][]byte, error) {
	var u *aclUser
	if ref := st.get(name); ref != nil {
		u = ref.rules.Load().clone()
	} else {
		u = newACLUser(name)
	}
	out := make([][]byte, len(ops))
	for i, op := range ops {
		if err := u.apply(op); err != nil {
			return nil, &aclModifierError{op: string(op), err: err}
		}
		switch {
		case len(op) > 0 && op[0] == '>':
			out[i] = []byte("#" + hashPassword(op[1:]))
		case len(op) > 0 && op[0] == '<':
			out[i] = []byte("!" + hashPassword(op[1:]))
		default:
			out[i] = op
		}
	}
	return out, nil
}

// Apply applies one committed change. The cluster node calls it on every
// member, in log order, from its state machine's goroutine.
func (st *ACL) Apply(change []byte) error {
	kind, fields, err := decodeACLChange(change)
	if err != nil {
		return err
	}
	switch kind {
	case aclChangeSet:
		if len(fields) == 0 {
			return errBadACLChange
		}
		return st.setUser(string(fields[0]), fields[1:])
	case aclChangeDel:
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = string(f)
		}
		st.disconnect(st.delUsers(names))
		return nil
	case aclChangeReplace:
		if len(fields) != 1 {
			return errBadACLChange
		}
		return st.Restore(fields[0])
	}
	return errBadACLChange
}

// Snapshot is every user, in the ACL file's format.
func (st *ACL) Snapshot() []byte {
	var b strings.Builder
	for _, n := range st.names() {
		b.WriteString("user " + n + " " + st.get(n).rules.Load().describe() + "\n")
	}
	return []byte(b.String())
}

// Restore replaces every user with those of a Snapshot.
func (st *ACL) Restore(state []byte) error {
	users, err := parseACLFile("snapshot", state)
	if err != nil {
		return err
	}
	st.disconnect(st.replace(users))
	return nil
}

// disconnect closes the connections of deleted users, through the server
// that holds them (set by New).
func (st *ACL) disconnect(gone []*userRef) {
	if f := st.onGone.Load(); f != nil && len(gone) > 0 {
		(*f)(gone)
	}
}
