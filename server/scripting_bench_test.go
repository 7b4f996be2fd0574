package server_test

import (
	"bufio"
	"fmt"
	"net"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// BenchmarkEvalSHA measures an EVALSHA round trip through the server and
// the engine (16 pipelined per write), so a profile shows what the
// scripting path costs beyond the interpreter.
func BenchmarkEvalSHA(b *testing.B) {
	scripts := server.NewScripts(nil)
	ts := sluicetest.Start(b, sluicetest.Options{Server: server.Config{Scripts: scripts}, Engine: engine.Config{Scripts: scripts}})
	const body = "local n = redis.call('incr', KEYS[1]) redis.call('expire', KEYS[1], 60) return n"
	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n", len(body), body)
	line, _ := r.ReadString('\n')
	sha := ""
	if _, err := fmt.Sscanf(line, "$40\r\n"); err == nil {
		sha, _ = r.ReadString('\n')
		sha = sha[:40]
	}
	var pipe []byte
	for i := range 16 {
		key := fmt.Sprintf("bench:%d", i)
		pipe = fmt.Appendf(pipe, "*4\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n", sha, len(key), key)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		c.Write(pipe)
		for range 16 {
			if _, err := sluicetest.ReadReply(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
