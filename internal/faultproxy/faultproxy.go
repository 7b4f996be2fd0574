// Package faultproxy is a loopback TCP proxy that makes a peer misbehave
// the ways networks do, without touching the peer: forward, swallow
// requests and never answer (a black hole), refuse and cut every connection
// (a partition), or deliver one direction's bytes late (a lagging link). The
// tests and sluice-bench's experiments share it. A Proxy is safe for
// concurrent use; Close stops it and waits for its goroutines.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how a Proxy treats traffic.
type Mode int32

// Modes.
const (
	// Forward passes bytes both ways (after the delay, if one is set).
	Forward Mode = iota
	// Blackhole accepts connections and swallows what clients send,
	// never forwarding it, so no answer ever comes. A connection that has
	// started swallowing stays swallowed, so a request cut in half is
	// never forwarded. Replies to requests forwarded earlier still pass.
	Blackhole
	// Refuse closes every proxied connection and every new one at once:
	// the link is cut until the mode changes.
	Refuse
)

// Direction names one way through the proxy.
type Direction int

// Directions.
const (
	// Requests flow from the client (who dials the proxy) to the target.
	// Raft's leader dials its followers and pushes entries down the
	// connections it opened, so delaying requests to a follower delays
	// the log it receives.
	Requests Direction = iota
	// Replies flow from the target back to the client. Between a Redis
	// replica (which dials) and its primary, that is the replication
	// stream.
	Replies
)

// maxQueuedChunks bounds the bytes a delayed direction holds back: when
// the queue is full the reader waits, so a fast sender slows down instead
// of growing memory.
const maxQueuedChunks = 1024

// Proxy forwards connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	lag    [2]atomic.Int64 // ns, per Direction

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) in front of target, which
// must be a loopback address: load and faults stay on this machine.
func New(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("faultproxy: target %s is not a loopback address", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetMode changes how traffic is treated from now on. Refuse also closes
// every connection already proxied.
func (p *Proxy) SetMode(m Mode) {
	p.mode.Store(int32(m))
	if m == Refuse {
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
		p.mu.Unlock()
	}
}

// SetDelay delays the bytes read from now on in direction d by lag,
// preserving their order. Zero passes them at once.
func (p *Proxy) SetDelay(d Direction, lag time.Duration) { p.lag[d].Store(int64(lag)) }

func (p *Proxy) modeNow() Mode { return Mode(p.mode.Load()) }

// track registers c for closing; it reports false (and closes c) once the
// proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.modeNow() == Refuse || !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	if p.modeNow() == Blackhole {
		io.Copy(io.Discard, client)
		p.untrack(client)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(up) {
		p.untrack(client)
		return
	}
	// A cut (Refuse) that raced with the dial must not leave a live link.
	if p.modeNow() == Refuse {
		p.untrack(client, up)
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pump(up, client, Replies)
	}()
	p.pump(client, up, Requests)
}

// pump copies src to dst in direction d: a reader stamps each chunk with
// when it is due (now plus the direction's lag), and a writer delivers it
// then. When either side fails, both connections close.
func (p *Proxy) pump(src, dst net.Conn, d Direction) {
	defer p.untrack(src, dst)
	type chunk struct {
		data []byte
		due  time.Time
	}
	queue := make(chan chunk, maxQueuedChunks)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(queue)
		buf := make([]byte, 32<<10)
		swallowing := false
		for {
			n, err := src.Read(buf)
			if n > 0 {
				// Only requests are swallowed: replies to what was
				// already forwarded still arrive.
				if d == Requests && p.modeNow() == Blackhole {
					swallowing = true
				}
				if !swallowing {
					queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.lag[d].Load()))}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			// Closing the source ends the reader; drain until it has, so
			// that it is never stuck on a full queue.
			src.Close()
			for range queue {
			}
			return
		}
	}
}

// Close stops listening, closes every proxied connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
