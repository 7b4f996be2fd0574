package server_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// BenchmarkPublish is PUBLISH over real connections, Sluice and a
// redis-server side by side (both on TCP loopback): 4 publishers sending
// pipelines of 16 PUBLISH of a 64-byte message to one channel with 0, 1
// and 10 subscribers, each reading everything it is sent. ns/op is per
// PUBLISH; msgs/s counts the messages the subscribers received.
func BenchmarkPublish(b *testing.B) {
	for _, server := range []string{"sluice", "redis"} {
		for _, subs := range []int{0, 1, 10} {
			b.Run(server+"/subscribers="+strconv.Itoa(subs), func(b *testing.B) {
				addr := ""
				if server == "sluice" {
					addr = sluicetest.Start(b, sluicetest.Options{}).Addr
				} else {
					// On TCP too, so that both pay the same loopback.
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					addr = ln.Addr().String()
					ln.Close()
					_, port, _ := net.SplitHostPort(addr)
					r := sluicetest.StartRedis(b, "--port", port, "--bind", "127.0.0.1")
					sluicetest.DialRaw(b, r.Network, r.Addr).Do(b, "PING")
				}
				benchPublish(b, addr, subs)
			})
		}
	}
}

func benchPublish(b *testing.B, addr string, subs int) {
	const depth, publishers = 16, 4
	var received atomic.Int64
	var readers sync.WaitGroup
	for range subs {
		c := sluicetest.DialRaw(b, "tcp", addr)
		c.Do(b, "SUBSCRIBE", "bench")
		c.Conn().SetDeadline(time.Time{})
		readers.Go(func() {
			r := bufio.NewReaderSize(c.Conn(), 64<<10)
			for {
				if _, err := sluicetest.ReadReply(r); err != nil {
					return
				}
				received.Add(1)
			}
		})
	}
	msg := string(make([]byte, 64))
	var pipeline []byte
	for range depth {
		pipeline = append(pipeline, sluicetest.EncodeCommand("PUBLISH", "bench", msg)...)
	}
	replyLen := len(":" + strconv.Itoa(subs) + "\r\n")
	conns := make([]net.Conn, publishers)
	for i := range conns {
		conns[i] = sluicetest.DialRaw(b, "tcp", addr).Conn()
		conns[i].SetDeadline(time.Time{})
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			buf := make([]byte, depth*replyLen)
			for next.Add(depth) <= int64(b.N)+depth-1 {
				if _, err := c.Write(pipeline); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	want := int64(subs) * (next.Load() - int64(publishers)*depth) // what the publishers' replies counted
	deadline := time.Now().Add(10 * time.Second)
	for received.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(received.Load())/time.Since(start).Seconds(), "msgs/s")
}
