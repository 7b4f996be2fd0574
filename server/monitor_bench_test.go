package server_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// BenchmarkDecisionsMonitor is a decision's cost over a real connection,
// pipelines of 16 CL.THROTTLE, with no monitor attached and with one that
// keeps up (its lines read and dropped): ns/op per decision.
func BenchmarkDecisionsMonitor(b *testing.B) {
	for _, mode := range []string{"none", "monitor"} {
		b.Run(mode, func(b *testing.B) {
			s := sluicetest.Start(b, sluicetest.Options{})
			if mode == "monitor" {
				mon := sluicetest.DialRaw(b, "tcp", s.Addr)
				if got := mon.Do(b, "MONITOR"); got != "+OK\r\n" {
					b.Fatal(got)
				}
				go io.Copy(io.Discard, mon.Conn())
			}
			benchDecisions(b, s.Addr)
		})
	}
}

func benchDecisions(b *testing.B, addr string) {
	const depth = 16
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var pipeline []byte
	for i := range depth {
		pipeline = append(pipeline, sluicetest.EncodeCommand("CL.THROTTLE", "bench:"+strconv.Itoa(i), "1000000", "1000000", "1")...)
	}
	r := bufio.NewReaderSize(c, 64<<10)
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		if _, err := c.Write(pipeline); err != nil {
			b.Fatal(err)
		}
		for range depth {
			if _, err := sluicetest.ReadReply(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
