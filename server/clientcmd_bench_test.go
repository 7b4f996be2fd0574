package server

import (
	"net"
	"testing"
)

// BenchmarkReadBookkeeping is what this file's features add to every read
// a connection serves while no pause or monitor is active: the hooks word
// loaded, and what CLIENT LIST shows of the connection published (the
// time; the buffer, query and transaction sizes compared and, unchanged,
// not stored). A read carries a whole pipeline; compare with a decision's
// cost (BenchmarkDecisionsMonitor, sluice-bench).
func BenchmarkReadBookkeeping(b *testing.B) {
	s := New(Config{}, nil)
	defer s.Close()
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	c := newClient(s, srv)
	cmd := commands["cl.throttle"]
	b.ReportAllocs()
	for b.Loop() {
		c.hooks = c.s.hooks.Load()
		c.noteCommand(cmd)
		if c.hooks != 0 {
			b.Fatal("a hook is active")
		}
		c.publish()
	}
}

// BenchmarkMonitorFeed is what a command costs the connection sending it
// while one monitor is attached: its line formatted and queued (the
// queue emptied as a writer that keeps up would).
func BenchmarkMonitorFeed(b *testing.B) {
	s := New(Config{}, nil)
	defer s.Close()
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	c := newClient(s, srv)
	m := newOutQueue(c)
	s.monitors.add(s, m)
	cmd := commands["cl.throttle"]
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("sluice-bench:cl.throttle:00001234"), []byte("99"), []byte("100"), []byte("1")}
	b.ReportAllocs()
	for b.Loop() {
		s.monitors.feed(c, cmd, args)
		m.mu.Lock()
		m.queue = m.queue[:0]
		m.mu.Unlock()
		select {
		case <-m.wake:
		default:
		}
	}
}
