package server

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/engine"
)

// The request scanner finds where a connection's first unfinished request
// ends, across reads, before anything parses it, and checks Redis's
// protocol limits the moment each length arrives:
//
//   - a multibulk count above 2^31-1, or above 10 before the connection
//     authenticates, and a bulk length above proto-max-bulk-len, or above
//     16 KiB before authentication, are protocol errors (Redis 7's texts;
//     the connection is closed after the reply), so an unauthenticated
//     client can make the server hold about 160 KiB of its request at most;
//   - a count or length line, or an inline request, of more than 64 KiB
//     without its end is a protocol error;
//   - a bulk longer than the largest value Sluice stores (1 MiB) cannot be
//     anything a command takes: its command is answered an error and its
//     bytes are dropped as they arrive, never buffered.
//
// The scan keeps its place between reads, so a request that arrives a
// byte at a time costs linear time in its size; only a complete request
// goes to the RESP parser, once. A request already whole in the buffer
// (the common case) is parsed at once and the same limits are checked on
// its arguments (client.checkArgs); the scan takes the others.

const (
	inlineMax      = 64 << 10      // PROTO_INLINE_MAX_SIZE
	unauthMaxArgs  = 10            // Redis 7, before AUTH
	unauthMaxBulk  = 16 << 10      // Redis 7, before AUTH
	largestArg     = 1 << 20       // a key plus its value: the shard's limit
	maxMultibulk   = math.MaxInt32 // INT_MAX
	scanHeaderNone = -1
)

var (
	errInlineTooBig    = errors.New("Protocol error: too big inline request")
	errMbulkLineTooBig = errors.New("Protocol error: too big mbulk count string")
	errMbulkInvalid    = errors.New("Protocol error: invalid multibulk length")
	errMbulkUnauth     = errors.New("Protocol error: unauthenticated multibulk length")
	errBulkLineTooBig  = errors.New("Protocol error: too big bulk count string")
	errBulkUnauth      = errors.New("Protocol error: unauthenticated bulk length")
	errArgTooLarge     = errors.New("value too large: a key plus its value may take at most 1 MiB")
)

// reqScan is the scan of one unfinished request. The zero value is a scan
// at a request's start.
type reqScan struct {
	started bool
	inline  bool
	pos     int // bytes of the request scanned so far
	// searched is how far the current line has been searched for its
	// end (from pos), so that a line arriving in pieces is read once.
	searched int
	args     int // bulks still to come; scanHeaderNone before the count
	bulk     int // bytes of the current bulk (with its CRLF) still to come; 0: its header next
	// refused: a bulk was larger than any argument can be; the request's
	// bytes are dropped as they come and it is answered errArgTooLarge.
	refused bool
}

// next scans buf, the connection's unread bytes from the start of the
// request, from where the last call stopped. It returns the length of the
// complete request (0 while it is unfinished) or a protocol error.
func (s *reqScan) next(buf []byte, authed bool, maxBulk int) (int, error) {
	if !s.started {
		if len(buf) == 0 {
			return 0, nil
		}
		*s = reqScan{started: true, inline: buf[0] != '*', args: scanHeaderNone}
	}
	if s.inline {
		i := bytes.IndexByte(buf[s.pos:], '\n')
		if i < 0 {
			s.pos = len(buf)
			if len(buf) > inlineMax {
				return 0, errInlineTooBig
			}
			return 0, nil
		}
		n := s.pos + i + 1
		*s = reqScan{}
		return n, nil
	}
	if s.args == scanHeaderNone {
		line, ok, err := s.line(buf, errMbulkLineTooBig)
		if !ok {
			return 0, err
		}
		n, perr := engine.ParseInt64(line[1:])
		switch {
		case perr != nil || n > maxMultibulk:
			return 0, errMbulkInvalid
		case n > unauthMaxArgs && !authed:
			return 0, errMbulkUnauth
		case n <= 0:
			end := s.pos
			*s = reqScan{}
			return end, nil
		}
		s.args = int(n)
	}
	for s.args > 0 {
		if s.bulk == 0 {
			if s.pos >= len(buf) {
				return 0, nil
			}
			if buf[s.pos] != '$' {
				return 0, fmt.Errorf("Protocol error: expected '$', got '%c'", buf[s.pos])
			}
			line, ok, err := s.line(buf, errBulkLineTooBig)
			if !ok {
				return 0, err
			}
			n, perr := engine.ParseInt64(line[1:])
			switch {
			case perr != nil || n < 0 || n > int64(maxBulk):
				return 0, errProtoBulk
			case n > unauthMaxBulk && !authed:
				return 0, errBulkUnauth
			case n > largestArg:
				s.refused = true
			}
			s.bulk = int(n) + 2
		}
		take := min(s.bulk, len(buf)-s.pos)
		s.pos += take
		s.bulk -= take
		if s.bulk > 0 {
			return 0, nil
		}
		s.args--
	}
	end := s.pos
	*s = reqScan{refused: s.refused}
	return end, nil
}

// line reads the line at pos (a count or length header, ending in CRLF,
// as Redis reads one: up to its CR, which must have its LF), moving pos
// past it. ok is false while it is unfinished, or with tooBig when more
// than 64 KiB came without its end.
func (s *reqScan) line(buf []byte, tooBig error) (line []byte, ok bool, err error) {
	rest := buf[s.pos:]
	i := bytes.IndexByte(rest[s.searched:], '\r')
	if i < 0 {
		s.searched = len(rest)
		if len(rest) > inlineMax {
			return nil, false, tooBig
		}
		return nil, false, nil
	}
	i += s.searched
	if i+1 >= len(rest) {
		s.searched = i // the LF has not come yet
		return nil, false, nil
	}
	s.pos += i + 2
	s.searched = 0
	return rest[:i], true, nil
}

// takeRefused reports whether the request just scanned was refused, and
// clears it.
func (s *reqScan) takeRefused() bool {
	r := s.refused
	s.refused = false
	return r
}

// dropping reports whether the unfinished request is being refused, so
// that its bytes so far can be let go.
func (s *reqScan) dropping() bool { return s.started && s.refused }

// dropped records that the first n scanned bytes were let go.
func (s *reqScan) dropped(n int) { s.pos -= n }
