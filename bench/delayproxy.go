package bench

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// delayDirection says which way a delayProxy holds bytes back.
type delayDirection int

const (
	// delayReplies delays bytes from the target back to the client. Put
	// between a Redis replica (the client, which dials) and its primary
	// (the target), it delays the replication stream.
	delayReplies delayDirection = iota
	// delayRequests delays bytes from the client to the target. Raft's
	// leader dials its followers and pushes entries down the connections
	// it opened, so a follower whose announced Raft address is the proxy
	// receives the log exactly lag late.
	delayRequests
)

// delayProxy is a loopback TCP proxy that delays every byte flowing one
// way by a settable lag, preserving order; bytes the other way pass at
// once. That is what a replica lagging behind looks like to a reader.
// Close stops it and waits for its goroutines.
type delayProxy struct {
	ln     net.Listener
	target string
	dir    delayDirection
	lag    atomic.Int64 // ns

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// delayQueueChunks bounds the bytes held back: when the queue is full the
// reader waits, so a fast sender slows down instead of growing memory.
const delayQueueChunks = 1024

func startDelayProxy(target string, dir delayDirection) (*delayProxy, error) {
	if _, err := CheckAddr(target, false); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, dir: dir, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// SetLag sets the delay for bytes read from now on.
func (p *delayProxy) SetLag(d time.Duration) { p.lag.Store(int64(d)) }

func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			p.untrack(client, server)
			return
		}
		// src -> dst is delayed; dst -> src passes at once.
		src, dst := server, client
		if p.dir == delayRequests {
			src, dst = client, server
		}
		p.wg.Add(3)
		go func() {
			defer p.wg.Done()
			defer p.untrack(client, server)
			buf := make([]byte, 32<<10)
			for {
				n, err := dst.Read(buf)
				if n > 0 {
					if _, werr := src.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		// Each chunk is due lag after it was read.
		type chunk struct {
			data []byte
			due  time.Time
		}
		queue := make(chan chunk, delayQueueChunks)
		go func() {
			defer p.wg.Done()
			defer close(queue)
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.lag.Load()))}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer p.wg.Done()
			defer p.untrack(client, server)
			for c := range queue {
				if d := time.Until(c.due); d > 0 {
					time.Sleep(d)
				}
				if _, err := dst.Write(c.data); err != nil {
					// Closing the source ends the reader; drain until it
					// has, so that it is never stuck on a full queue.
					src.Close()
					for range queue {
					}
					return
				}
			}
		}()
	}
}

// Close stops listening, closes every proxied connection and waits for
// the proxy's goroutines.
func (p *delayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("delay proxy: %w", err)
	}
	return nil
}
