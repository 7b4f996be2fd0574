package bench

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/tidwall/redcon"
)

// request is one command shape, pre-encoded: everything before the key and
// everything after it are constant for a run, so a request costs two copies
// and one bulk header for the key.
type request struct {
	head  []byte // array header, command name and any fixed leading args
	tail  []byte // fixed args after the key
	keyed bool
	// extra repeats the key, with a suffix, followed by more fixed args:
	// LIMIT.ALL names one key per limit.
	extra   []keySlot
	scratch []byte // the suffixed key; each worker has its own copy
}

// keySlot is one more occurrence of the key in a request.
type keySlot struct {
	suffix string
	after  []byte // fixed args after it, encoded
}

// newRequest pre-encodes `before... [key] after...`.
func newRequest(before []string, keyed bool, after []string) request {
	n := len(before) + len(after)
	if keyed {
		n++
	}
	head := redcon.AppendArray(nil, n)
	for _, s := range before {
		head = redcon.AppendBulkString(head, s)
	}
	var tail []byte
	for _, s := range after {
		tail = redcon.AppendBulkString(tail, s)
	}
	return request{head: head, tail: tail, keyed: keyed}
}

// appendTo appends the request for key to dst.
func (q *request) appendTo(dst, key []byte) []byte {
	dst = append(dst, q.head...)
	if q.keyed {
		dst = redcon.AppendBulk(dst, key)
	}
	dst = append(dst, q.tail...)
	for _, s := range q.extra {
		q.scratch = append(append(q.scratch[:0], key...), s.suffix...)
		dst = redcon.AppendBulk(dst, q.scratch)
		dst = append(dst, s.after...)
	}
	return dst
}

// newLimitAllRequest encodes LIMIT.ALL over three limits on three keys
// derived from one: CL.THROTTLE key, SW.CHECK key:sw, FW.CHECK key:fw.
func newLimitAllRequest(l Limit) request {
	encode := func(args ...string) []byte {
		var b []byte
		for _, a := range args {
			b = redcon.AppendBulkString(b, a)
		}
		return b
	}
	win := windowArgs(l)
	head := redcon.AppendArray(nil, 2+6+5+5) // LIMIT.ALL 3, then three limits
	head = append(head, encode("LIMIT.ALL", "3", "CL.THROTTLE")...)
	return request{
		head:  head,
		tail:  encode(append(gcraArgs(l), "SW.CHECK")...),
		keyed: true,
		extra: []keySlot{
			{suffix: ":sw", after: encode(append(win, "FW.CHECK")...)},
			{suffix: ":fw", after: encode(win...)},
		},
	}
}

// outcome is how a reply is counted.
type outcome uint8

const (
	outAllowed outcome = iota // any success reply; for decision modes, limited == 0
	outLimited                // decision reply with limited == 1
	outError                  // error reply, or a reply of the wrong shape
)

// classify counts one reply. decision says the reply must be an array whose
// first element is the integer 0 (allowed) or 1 (limited), as CL.THROTTLE,
// the *.CHECK commands and this package's Lua scripts answer.
func classify(resp redcon.RESP, decision bool) outcome {
	if resp.Type == redcon.Error {
		return outError
	}
	if !decision {
		return outAllowed
	}
	if resp.Type != redcon.Array || resp.Count < 1 {
		return outError
	}
	_, first := redcon.ReadNextRESP(resp.Data)
	if first.Type != redcon.Integer || len(first.Data) != 1 {
		return outError
	}
	switch first.Data[0] {
	case '0':
		return outAllowed
	case '1':
		return outLimited
	}
	return outError
}

// describeBad returns the text recorded for a reply that classify counted as
// an error: the server's message, or the start of an unexpected reply.
func describeBad(resp redcon.RESP) string {
	if resp.Type == redcon.Error {
		return string(resp.Data)
	}
	raw := resp.Raw
	if len(raw) > 80 {
		raw = raw[:80]
	}
	return "unexpected reply " + strconv.Quote(string(raw))
}

// errProtocol reports bytes that cannot start or continue a RESP2 reply.
var errProtocol = errors.New("protocol error")

// maxReply bounds one reply; a larger one is treated as a protocol error
// rather than growing the buffer without limit.
const maxReply = 64 << 20

// replyReader parses replies out of one reusable buffer: it reads whatever
// the connection has, hands out complete replies that point into the buffer,
// and keeps a trailing partial reply for the next read. A reply is valid only
// until the next fill.
type replyReader struct {
	buf  []byte
	r, w int // unread data is buf[r:w]
}

func newReplyReader(size int) replyReader {
	return replyReader{buf: make([]byte, size)}
}

// next returns the next complete reply, or ok == false when more bytes are
// needed.
func (rd *replyReader) next() (resp redcon.RESP, ok bool, err error) {
	if rd.r == rd.w {
		return resp, false, nil
	}
	switch rd.buf[rd.r] {
	case redcon.Integer, redcon.String, redcon.Bulk, redcon.Array, redcon.Error:
	default:
		return resp, false, fmt.Errorf("%w: unexpected byte %q at the start of a reply", errProtocol, rd.buf[rd.r])
	}
	n, resp := redcon.ReadNextRESP(rd.buf[rd.r:rd.w])
	if n == 0 {
		// ReadNextRESP cannot tell "incomplete" from "malformed"; a malformed
		// reply ends as a read timeout or as the size limit below.
		return resp, false, nil
	}
	rd.r += n
	return resp, true, nil
}

// buffered reports how many unread bytes are held.
func (rd *replyReader) buffered() int { return rd.w - rd.r }

// fill reads once from src, after moving a partial reply to the front of
// the buffer (or growing it when the partial reply fills it).
func (rd *replyReader) fill(src io.Reader) error {
	if rd.r > 0 {
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
	}
	if rd.w == len(rd.buf) {
		if len(rd.buf) >= maxReply {
			return fmt.Errorf("%w: reply larger than %d bytes", errProtocol, maxReply)
		}
		grown := make([]byte, 2*len(rd.buf))
		copy(grown, rd.buf[:rd.w])
		rd.buf = grown
	}
	n, err := src.Read(rd.buf[rd.w:])
	rd.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// roundTrip sends one command and waits for its reply. It is for setup
// (SCRIPT LOAD, checks), not for the measured path.
func roundTrip(rw io.ReadWriter, rd *replyReader, args ...string) (redcon.RESP, error) {
	q := newRequest(args, false, nil)
	if _, err := rw.Write(q.head); err != nil {
		return redcon.RESP{}, err
	}
	for {
		resp, ok, err := rd.next()
		if err != nil {
			return resp, err
		}
		if ok {
			return resp, nil
		}
		if err := rd.fill(rw); err != nil {
			return resp, err
		}
	}
}
