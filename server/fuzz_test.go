package server

import (
	"bytes"
	"net"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// seedCommands are real commands, one argument per line.
var seedCommands = []string{
	"CL.THROTTLE\nk\n4\n1\n1\n1\nMS",
	"CL.THROTTLE\nk\n15\n30\n60.5",
	"SW.CHECK\nk\n100\n0.5\n3",
	"SL.CHECK\nk\n10\n60",
	"FW.CHECK\nk\n5000\n1\n1\nMS",
	"LIMIT.ALL\n2\nCL.THROTTLE\na\n9\n10\n60\n1\nSW.CHECK\nb\n100\n60\n1",
	"LIMIT.REFUND\nk\n3",
	"SET\nk\nv\nEX\n10\nNX\nGET",
	"EXPIRE\nk\n10\nGT",
	"SCAN\n0\nMATCH\na*\nCOUNT\n5\nTYPE\ngcra",
	"INCRBY\nk\n-9223372036854775808",
	"CONC.ACQUIRE\nk\n5\n30.5\nID\njob-1",
	"CONC.RENEW\nk\njob-1\n0.25",
}

// FuzzParsers feeds arbitrary argument lists to every command's parser:
// none may panic, and a parser that accepts must produce a known op (its
// row's).
func FuzzParsers(f *testing.F) {
	for _, s := range seedCommands {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args := bytes.Split(data, []byte("\n"))
		for _, cmd := range commands {
			if cmd.parse == nil {
				continue
			}
			full := append([][]byte{[]byte(cmd.name)}, args[1:]...)
			if (cmd.arity > 0 && len(full) != cmd.arity) || (cmd.arity < 0 && len(full) < -cmd.arity) {
				continue
			}
			var c engine.Command
			if err := cmd.parseInto(&c, full); err == nil && (c.Op == engine.OpNone || c.Op != cmd.op || c.Op.Spec().Name == "") {
				t.Fatalf("%s accepted %q without an op", cmd.name, data)
			}
		}
	})
}

// FuzzProtocol feeds arbitrary bytes to a connection's pipeline processing
// against a real engine: nothing may panic, and the connection answers or
// closes.
func FuzzProtocol(f *testing.F) {
	f.Add([]byte("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n"))
	f.Add([]byte("*6\r\n$11\r\nCL.THROTTLE\r\n$1\r\nk\r\n$1\r\n4\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n"))
	f.Add([]byte("PING\r\nSET a \"b c\"\r\nGET a\r\n"))
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n"))
	f.Add([]byte("*1\r\n$-7\r\nabcdefg\r\n"))
	eng := engine.New(engine.Config{Shards: 2})
	defer eng.Close()
	srv := New(Config{EnableDebug: DebugYes}, eng)
	defer srv.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		c := newClient(srv, a)
		c.end = copy(c.rbuf, data)
		c.process()
		if c.start > c.end || c.end > len(c.rbuf) {
			t.Fatalf("read buffer bounds broken: start %d end %d", c.start, c.end)
		}
	})
}
