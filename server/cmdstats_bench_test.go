package server

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// discardConn is a connection whose replies go nowhere, so that a
// benchmark measures the server's work on a pipeline and not a socket's.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error)      { return len(p), nil }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// processCPU is the process's user and system CPU time so far, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkDecisionPath is the server's CPU for pipelines of CL.THROTTLE
// (parse, dispatch, the engine batch, the accounting, the replies) per
// decision, with latency-tracking yes and no, alternated by -count: the
// histograms' share of a decision.
func BenchmarkDecisionPath(b *testing.B) {
	for _, p := range []int{1, 16} {
		for _, tracking := range []string{"yes", "no"} {
			b.Run("P="+strconv.Itoa(p)+"/latency-tracking="+tracking, func(b *testing.B) {
				eng := engine.New(engine.Config{Shards: 4})
				defer eng.Close()
				s := New(Config{SweepInterval: -1}, eng)
				defer s.Close()
				if err := s.stats.set("latency-tracking", tracking); err != nil {
					b.Fatal(err)
				}
				c := newClient(s, discardConn{})
				var req []byte
				for i := range p {
					key := "bench:" + strconv.Itoa(i)
					req = append(req, "*5\r\n$11\r\nCL.THROTTLE\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n$9\r\n999999999\r\n$9\r\n999999999\r\n$2\r\n60\r\n"...)
				}
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					c.start, c.end = 0, copy(c.rbuf, req)
					if c.process() != p {
						b.Fatal("not every command ran")
					}
					c.flushOut()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p), "ns/decision")
				// CPU, the process's (the shards' goroutines too): less
				// sensitive than time to a shared machine.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*p), "cpu-ns/decision")
			})
		}
	}
}

// BenchmarkCommandAccounting is what the accounting adds to a batch of P
// commands, per command: the two clock reads around the engine call, the
// per-command count and the fold into the shared counters (with the
// histogram, latency-tracking yes).
func BenchmarkCommandAccounting(b *testing.B) {
	for _, p := range []int{1, 16} {
		b.Run("P="+strconv.Itoa(p), func(b *testing.B) {
			eng := engine.New(engine.Config{Shards: 1})
			defer eng.Close()
			s := New(Config{SweepInterval: -1}, eng)
			defer s.Close()
			c := newClient(s, discardConn{})
			id := int32(commands["cl.throttle"].id)
			b.ReportAllocs()
			for b.Loop() {
				start := monoNow()
				for range p {
					errs := c.acct.errors
					c.batchCall(id, c.acct.errors > errs)
				}
				c.batchDone(monoNow()-start, p)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p), "ns/command")
		})
	}
}
