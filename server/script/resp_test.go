package script_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// encode writes r as Redis writes a script's reply to a client of
// protocol proto (2 or 3): maps and sets flat in RESP2, doubles as %.17g
// (a bulk string in RESP2), nil as $-1 or _.
func encode(b []byte, r *engine.Reply, proto int) []byte {
	switch r.Kind {
	case engine.ReplyNil, engine.ReplyNilArray:
		if proto == 3 {
			return append(b, "_\r\n"...)
		}
		if r.Kind == engine.ReplyNilArray {
			return append(b, "*-1\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case engine.ReplyOK:
		return append(b, "+OK\r\n"...)
	case engine.ReplyStatus:
		return append(append(append(b, '+'), r.Str...), "\r\n"...)
	case engine.ReplyInt:
		return append(strconv.AppendInt(append(b, ':'), r.Int, 10), "\r\n"...)
	case engine.ReplyBulk:
		s := r.Str
		if r.Bulk != nil {
			s = string(r.Bulk)
		}
		return bulk(b, s)
	case engine.ReplyError:
		return append(append(append(b, '-'), r.Err.Error()...), "\r\n"...)
	case engine.ReplyArray, engine.ReplyPairs:
		b = append(strconv.AppendInt(append(b, '*'), int64(len(r.Items)), 10), "\r\n"...)
		for i := range r.Items {
			b = encode(b, &r.Items[i], proto)
		}
		return b
	case engine.ReplyMap:
		if proto == 3 {
			b = append(strconv.AppendInt(append(b, '%'), int64(len(r.Items)/2), 10), "\r\n"...)
		} else {
			b = append(strconv.AppendInt(append(b, '*'), int64(len(r.Items)), 10), "\r\n"...)
		}
		for i := range r.Items {
			b = encode(b, &r.Items[i], proto)
		}
		return b
	case engine.ReplySet:
		c := byte('*')
		if proto == 3 {
			c = '~'
		}
		b = append(strconv.AppendInt(append(b, c), int64(len(r.Items)), 10), "\r\n"...)
		for i := range r.Items {
			b = encode(b, &r.Items[i], proto)
		}
		return b
	case engine.ReplyBool:
		if proto == 3 {
			return append(b, map[bool]string{true: "#t\r\n", false: "#f\r\n"}[r.Int != 0]...)
		}
		return append(strconv.AppendInt(append(b, ':'), r.Int, 10), "\r\n"...)
	case engine.ReplyBigNumber:
		if proto == 3 {
			return append(append(append(b, '('), r.Str...), "\r\n"...)
		}
		return bulk(b, r.Str)
	case engine.ReplyDouble:
		s := redisDouble(r.Float)
		if proto == 3 {
			return append(append(append(b, ','), s...), "\r\n"...)
		}
		return bulk(b, s)
	}
	panic(fmt.Sprintf("reply kind %d", r.Kind))
}

func bulk(b []byte, s string) []byte {
	b = append(strconv.AppendInt(append(b, '$'), int64(len(s)), 10), "\r\n"...)
	return append(append(b, s...), "\r\n"...)
}

// redisDouble is addReplyDouble's text: %.17g, inf and -inf.
func redisDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// fromValue converts a RESP3 reply (of a command a script ran) to an
// engine.Reply.
func fromValue(v difftest.Value) engine.Reply {
	switch v.Kind {
	case ':':
		n, _ := strconv.ParseInt(v.Str, 10, 64)
		return engine.Reply{Kind: engine.ReplyInt, Int: n}
	case '$':
		if v.Null {
			return engine.Reply{Kind: engine.ReplyNil}
		}
		return engine.Reply{Kind: engine.ReplyBulk, Bulk: []byte(v.Str)}
	case '+':
		return engine.Reply{Kind: engine.ReplyStatus, Str: v.Str}
	case '-':
		return engine.Reply{Kind: engine.ReplyError, Err: engine.RawError(v.Str)}
	case '_':
		return engine.Reply{Kind: engine.ReplyNil}
	case ',':
		var f float64
		switch v.Str {
		case "inf":
			f = math.Inf(1)
		case "-inf":
			f = math.Inf(-1)
		case "nan":
			f = math.NaN()
		case "-nan":
			f = math.Copysign(math.NaN(), -1)
		default:
			f, _ = strconv.ParseFloat(v.Str, 64)
		}
		return engine.Reply{Kind: engine.ReplyDouble, Float: f}
	case '*', '%', '~':
		if v.Null {
			return engine.Reply{Kind: engine.ReplyNilArray}
		}
		kind := map[byte]engine.ReplyKind{'*': engine.ReplyArray, '%': engine.ReplyMap, '~': engine.ReplySet}[v.Kind]
		items := make([]engine.Reply, len(v.Items))
		for i, it := range v.Items {
			items[i] = fromValue(it)
		}
		return engine.Reply{Kind: kind, Items: items}
	}
	panic(fmt.Sprintf("RESP type %q in a command's reply", v.Kind))
}

// conn is a raw RESP connection that returns errors rather than failing.
type conn struct {
	rc *sluicetest.RawConn
	r  *bufio.Reader
}

func dial(tb testing.TB, r *sluicetest.Redis) *conn {
	rc := sluicetest.DialRaw(tb, r.Network, r.Addr)
	return &conn{rc: rc, r: bufio.NewReader(rc.Conn())}
}

func (c *conn) do(args ...string) (string, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.rc.Conn().SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.rc.Conn().Write(b.Bytes()); err != nil {
		return "", err
	}
	out, err := sluicetest.ReadReply(c.r)
	return string(out), err
}

func (c *conn) must(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := c.do(args...)
	if err != nil {
		tb.Fatalf("%q: %v", args, err)
	}
	return out
}

// forwardHost is a Host whose commands run on a real redis-server inside
// a script of their own (EVAL "return redis.pcall(...)"), so that each
// gets exactly the reply, or the script-only refusal, it gets inside a
// script there: the oracle for Host.Call. The wrapper runs under the
// RESP3 (over a RESP3 connection), so that replies keep their kinds (map,
// set, double, null) as engine.Reply does, and with the script's shebang.
// (Replies whose RESP3 shape is not just RESP2's retyped, ZRANGE
// WITHSCORES, are not forwarded faithfully: the corpus avoids them.)
type forwardHost struct {
	tb      testing.TB
	c       *conn
	shebang string
	logs    []string
	calls   int
}

const forwardBody = "redis.setresp(3) return redis.pcall(unpack(ARGV))"

// direct are the commands the host sends as they are (their replies, in
// order, with RESP3's kinds): plain data commands whose only script-only
// behaviours are the arity and shebang refusals, which go through the
// wrapper.
var direct = map[string]bool{
	"get": true, "set": true, "incr": true, "incrbyfloat": true, "del": true, "exists": true,
	"hset": true, "hgetall": true, "hmget": true, "hget": true, "rpush": true, "lrange": true,
	"zadd": true, "zscore": true, "zincrby": true, "zrange": true, "sadd": true, "smembers": true,
	"scard": true, "type": true, "expire": true, "ping": true, "lpush": true, "object": true,
}

func (h *forwardHost) Call(args [][]byte) engine.Reply {
	h.calls++
	if direct[strings.ToLower(string(args[0]))] && h.shebang == "" {
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		out, err := h.c.do(cmd...)
		if err != nil {
			h.tb.Fatalf("forwarding %q: %v", args, err)
		}
		if !strings.HasPrefix(out, "-ERR wrong number of arguments") {
			v, err := difftest.Parse([]byte(out))
			if err != nil {
				h.tb.Fatalf("forwarding %q: %v (%q)", args, err, out)
			}
			return fromValue(v)
		}
	}
	cmd := []string{"EVAL", h.shebang + forwardBody, "0"}
	for _, a := range args {
		cmd = append(cmd, string(a))
	}
	out, err := h.c.do(cmd...)
	if err != nil {
		h.tb.Fatalf("forwarding %q: %v", args, err)
	}
	v, err := difftest.Parse([]byte(out))
	if err != nil {
		h.tb.Fatalf("forwarding %q: %v (%q)", args, err, out)
	}
	return fromValue(v)
}

func (h *forwardHost) Now() int64 { return time.Now().UnixNano() }

func (h *forwardHost) Log(level int, msg string) {
	h.logs = append(h.logs, strconv.Itoa(level)+" "+msg)
}
