package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The command codec: how commands travel in journal records and in Raft
// entries. Only writes are encoded; a decoder accepts exactly the shapes the
// op table allows.

// hasArgs marks, in the byte after the op, a command that carries Args.
// Records written before Args existed never set it, so they still decode.
const hasArgs = 0x80

// hasReqID marks, in the same byte, a command that carries a request id
// and its receipt's lifetime (after Args).
const hasReqID = 0x40

func appendCommand(buf []byte, c *Command) []byte {
	multi := byte(c.Multi)
	if len(c.Args) > 0 {
		multi |= hasArgs
	}
	if len(c.ReqID) > 0 {
		multi |= hasReqID
	}
	buf = append(buf, byte(c.Op), multi)
	buf = binary.AppendUvarint(buf, uint64(c.Flags))
	buf = binary.AppendUvarint(buf, uint64(len(c.Key)))
	buf = append(buf, c.Key...)
	buf = binary.AppendUvarint(buf, uint64(len(c.Value)))
	buf = append(buf, c.Value...)
	for _, n := range c.N {
		buf = binary.AppendVarint(buf, n)
	}
	if len(c.Args) > 0 {
		buf = binary.AppendUvarint(buf, uint64(len(c.Args)))
		for _, a := range c.Args {
			buf = binary.AppendUvarint(buf, uint64(len(a)))
			buf = append(buf, a...)
		}
	}
	if len(c.ReqID) > 0 {
		buf = binary.AppendUvarint(buf, uint64(len(c.ReqID)))
		buf = append(buf, c.ReqID...)
		buf = binary.AppendVarint(buf, c.ReqTTL)
	}
	// Sub-commands (LIMIT.ALL, multi-key DEL): one level deep.
	buf = binary.AppendUvarint(buf, uint64(len(c.Sub)))
	for i := range c.Sub {
		buf = appendCommand(buf, &c.Sub[i])
	}
	return buf
}

// EncodeCommands appends a self-delimiting encoding of cmds to buf: the
// format cluster mode replicates, and the journal's body.
func EncodeCommands(buf []byte, cmds []Command) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(cmds)))
	for i := range cmds {
		buf = appendCommand(buf, &cmds[i])
	}
	return buf
}

// DecodeCommands parses what EncodeCommands wrote, appending to into.
// Commands alias b. Only state-changing operations are accepted.
func DecodeCommands(b []byte, into []Command) ([]Command, []byte, error) {
	r := reader{b: b}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(b)) {
		return into, nil, errBadRecord
	}
	for i := uint64(0); i < n; i++ {
		c, err := r.command(0)
		if err != nil {
			return into, nil, err
		}
		into = append(into, c)
	}
	return into, r.b, nil
}

func (r *reader) command(depth int) (Command, error) { return r.commandUnder(depth, OpNone) }

// commandUnder decodes a command at depth (0 at the top) under parent.
func (r *reader) commandUnder(depth int, parent Op) (Command, error) {
	var c Command
	c.Op = Op(r.byte())
	multi := r.byte()
	c.Multi = MultiKind(multi &^ (hasArgs | hasReqID))
	c.Flags = Flags(r.uvarint())
	c.Key = r.bytes()
	c.Value = r.bytes()
	for k := range c.N {
		c.N[k] = r.varint()
	}
	if multi&hasArgs != 0 {
		n := r.uvarint()
		if r.err != nil || n == 0 || n > uint64(len(r.b)) {
			return c, errBadRecord
		}
		c.Args = make([][]byte, n)
		for i := range c.Args {
			c.Args[i] = r.bytes()
		}
	}
	if multi&hasReqID != 0 {
		c.ReqID = r.bytes()
		c.ReqTTL = r.varint()
		if r.err != nil || len(c.ReqID) == 0 || len(c.ReqID) > MaxReqIDLen || c.ReqTTL <= 0 {
			return c, errBadRecord
		}
	}
	subs := r.uvarint()
	// Sub-commands nest one level, or two inside EXEC (a queued DEL k1 k2).
	nestable := depth == 0 || (depth == 1 && parent == OpExec)
	if r.err != nil || subs > uint64(len(r.b)) || (subs > 0 && !nestable) {
		return c, errBadRecord
	}
	for i := uint64(0); i < subs; i++ {
		sub, err := r.commandUnder(depth+1, c.Op)
		if err != nil {
			return c, err
		}
		c.Sub = append(c.Sub, sub)
	}
	if err := c.validShape(depth, parent); err != nil {
		return c, err
	}
	return c, nil
}

// validShape accepts exactly the shapes the engine produces: only writes
// travel at the top; sub-commands only under the ops that take them.
func (c *Command) validShape(depth int, parent Op) error {
	spec := c.Op.spec()
	bad := func(what string) error { return fmt.Errorf("%w: op %d %s", errBadRecord, c.Op, what) }
	switch {
	case spec.Name == "":
		return bad("is unknown")
	case depth == 0 && !spec.Writes:
		return bad("does not write")
	case c.Op == OpWatchCheck && parent != OpExec:
		return bad("outside EXEC")
	case c.Op == OpExec && depth > 0:
		return bad("nested")
	case len(c.ReqID) > 0 && !spec.takesReqID() && c.Op != OpReceipt, c.Op == OpReceipt && len(c.ReqID) == 0:
		return bad("with a request id it does not take")
	case len(c.ReqID) > 0 && parent == OpLimitAll:
		return bad("with a request id under LIMIT.ALL")
	case spec.Keys == KeysLimits && len(c.Sub) == 0:
		return bad("without limits")
	case c.Op == OpRename && parent != OpRename && len(c.Sub) != 2:
		return bad("without its two keys")
	case len(c.Sub) > 0 && spec.Keys != KeysOne && spec.Keys != KeysLimits && spec.Keys != KeysHeld:
		return bad("has sub-commands")
	}
	if c.Op == OpExec && (c.N[0] < 0 || c.N[0] > int64(len(c.Sub))) {
		return bad("has a bad watch count")
	}
	for i := range c.Sub {
		sub := &c.Sub[i]
		var ok bool
		switch {
		case c.Op == OpExec:
			ok = (sub.Op == OpWatchCheck) == (int64(i) < c.N[0])
		case spec.Keys == KeysLimits:
			ok = sub.Op.spec().Decision && len(sub.Sub) == 0
		case spec.coordinated:
			ok = sub.Op == OpScriptKey && len(sub.Sub) == 0
		default:
			ok = sub.Op == c.Op && len(sub.Sub) == 0
		}
		if !ok {
			return fmt.Errorf("%w: op %d under op %d", errBadRecord, sub.Op, c.Op)
		}
	}
	return nil
}

var errBadRecord = errors.New("malformed journal record")

type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errBadRecord
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadRecord
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
