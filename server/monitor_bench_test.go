package server_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// BenchmarkDecisionsMonitor is a decision's cost over real connections,
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

// benchDecisions sends pipelines of 16 decisions from 8 connections per
// GOMAXPROCS at once, so that the server's CPU, not the round trip,
// bounds it: ns/op is per decision.
func benchDecisions(b *testing.B, addr string) {
	const depth = 16
	var pipeline []byte
	for i := range depth {
		pipeline = append(pipeline, sluicetest.EncodeCommand("CL.THROTTLE", "bench:"+strconv.Itoa(i), "1000000", "1000000", "1")...)
	}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		r := bufio.NewReaderSize(c, 64<<10)
		for {
			// One pipeline per depth iterations: pb.Next counts decisions.
			for range depth {
				if !pb.Next() {
					return
				}
			}
			if _, err := c.Write(pipeline); err != nil {
				b.Error(err)
				return
			}
			for range depth {
				if _, err := sluicetest.ReadReply(r); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}
