package server_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// BenchmarkEvalSHA measures EVALSHA round trips through the server and
// the engine (16 pipelined per write, or one at a time, over 1,000 keys), so that a profile
// shows what the scripting path costs: a trivial script, and go-redis/
// redis_rate's GCRA script as sluice-bench sends it.
func BenchmarkEvalSHA(b *testing.B) {
	gcra := difftest.AccelBody(b, difftest.AccelScript{File: "redis_rate_allown.lua"})
	rlr := difftest.AccelBody(b, difftest.AccelScript{File: "rate_limit_redis_increment.lua"})
	for _, bc := range []struct {
		name, body string
		args       []string
	}{
		{"incr", "local n = redis.call('incr', KEYS[1]) redis.call('expire', KEYS[1], 60) return n", nil},
		{"redis_rate", gcra, []string{"100", "100", "1", "1"}},
		{"rate_limit_redis", rlr, []string{"60000"}},
	} {
		b.Run(bc.name+"/P16", func(b *testing.B) { benchEvalSHA(b, bc.body, bc.args, 16) })
		b.Run(bc.name+"/P1", func(b *testing.B) { benchEvalSHA(b, bc.body, bc.args, 1) })
	}
}

func benchEvalSHA(b *testing.B, body string, args []string, depth int) {
	scripts := server.NewScripts(nil)
	ts := sluicetest.Start(b, sluicetest.Options{Server: server.Config{Scripts: scripts}, Engine: engine.Config{Scripts: scripts}})
	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	send := func(args ...string) string {
		var out []byte
		out = fmt.Appendf(out, "*%d\r\n", len(args))
		for _, a := range args {
			out = fmt.Appendf(out, "$%d\r\n%s\r\n", len(a), a)
		}
		c.Write(out)
		reply, err := sluicetest.ReadReply(r)
		if err != nil {
			b.Fatal(err)
		}
		return string(reply)
	}
	sha := strings.Split(send("SCRIPT", "LOAD", body), "\r\n")[1]
	var pipes [][]byte
	for p := range 1024 / depth {
		var pipe []byte
		for i := range depth {
			cmd := append([]string{"EVALSHA", sha, "1", fmt.Sprintf("bench:%d", (p*depth+i)%1000)}, args...)
			pipe = fmt.Appendf(pipe, "*%d\r\n", len(cmd))
			for _, a := range cmd {
				pipe = fmt.Appendf(pipe, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		pipes = append(pipes, pipe)
	}
	if reply := send(append([]string{"EVALSHA", sha, "1", "check"}, args...)...); reply[0] == '-' {
		b.Fatal(reply)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		c.Write(pipes[(i/depth)%len(pipes)])
		for range depth {
			if _, err := sluicetest.ReadReply(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
