package server

import (
	"sync"
	"time"
)

// outQueue is the output of a connection that others write to as well: a
// monitor's lines (monitor.go), a subscriber's messages (pubsub.go). Its
// own goroutine writes the queue to the socket, so a slow reader never
// blocks the connections that feed it, and the connection's own replies
// go through the queue too, in order with what the others queued.
//
// The queue is bounded. Past the hard limit of the connection's
// client-output-buffer-limit class (pubsub while it is subscribed, normal
// otherwise; queueLimit when the class sets none), or over the soft limit
// for longer than its seconds, the connection is closed, logged as Redis
// logs an output buffer overflow.
type outQueue struct {
	c     *client
	mu    sync.Mutex
	queue []byte // bytes not yet written
	// While the connection runs EXEC, messages published to it wait in
	// held (heldFor: where each ends and what it was sent for), to follow
	// EXEC's reply rather than land inside it.
	holding   bool
	held      []byte
	heldFor   []heldMessage
	softSince time.Time // the queue went over the soft limit (zero: it is not over)
	cut       bool      // closed for its queue, or its socket failed: queue nothing more
	wake      chan struct{}
	gone      chan struct{} // closed when the queue is to end
	done      chan struct{} // closed when the writer returns
}

// heldMessage is one held message: held[previous end:end], published for
// the subscription kind/name.
type heldMessage struct {
	end  int
	kind subKind
	name string
}

// queueLimit bounds a queue whose class sets no hard limit (the normal
// class's default, under which a slow monitor would grow without bound).
const queueLimit = 32 << 20

func newOutQueue(c *client) *outQueue {
	return &outQueue{c: c, wake: make(chan struct{}, 1), gone: make(chan struct{}), done: make(chan struct{})}
}

// limit is the output buffer limit the connection is under now.
func (q *outQueue) limit(s *Server) OutputBufferLimit {
	class := ClassNormal
	if q.c.subsN.Load() > 0 {
		class = ClassPubSub
	}
	l := s.obuf.Load()[class]
	if l.Hard == 0 {
		l.Hard = queueLimit
	}
	return l
}

// admit checks that adding n bytes keeps the queue within its limits, or
// marks it cut and reports false, the caller then closing the connection
// (outside mu). Called with mu held.
func (q *outQueue) admit(s *Server, n int) bool {
	l := q.limit(s)
	owed := len(q.queue) + len(q.held) + n
	switch {
	case over(owed, l.Hard):
	case !over(owed, l.Soft):
		q.softSince = time.Time{}
		return true
	case q.softSince.IsZero():
		q.softSince = time.Now()
		return true
	case time.Since(q.softSince) <= time.Duration(l.SoftSeconds)*time.Second:
		return true
	}
	q.cut, q.queue, q.held, q.heldFor = true, nil, nil, nil
	return false
}

// overflowed closes the connection whose queue passed its limit.
func (q *outQueue) overflowed(s *Server) {
	s.obufClosed.Add(1)
	s.log.Warn("Client scheduled to be closed ASAP for overcoming of output buffer limits.", "client", q.c.info(nil, 0))
	q.c.kill()
}

// push queues b (the connection's replies, a monitor's line) for the
// writer.
func (q *outQueue) push(s *Server, b []byte) { q.add(s, b, false, 0, "") }

// pushMessage queues a message published for the subscription kind/name,
// or holds it while the connection runs EXEC.
func (q *outQueue) pushMessage(s *Server, b []byte, kind subKind, name string) {
	q.add(s, b, true, kind, name)
}

func (q *outQueue) add(s *Server, b []byte, message bool, kind subKind, name string) {
	if len(b) == 0 {
		return
	}
	q.mu.Lock()
	if q.cut {
		q.mu.Unlock()
		return
	}
	if !q.admit(s, len(b)) {
		q.mu.Unlock()
		q.overflowed(s)
		return
	}
	if message && q.holding {
		q.held = append(q.held, b...)
		q.heldFor = append(q.heldFor, heldMessage{end: len(q.held), kind: kind, name: name})
		q.mu.Unlock()
		return
	}
	q.queue = append(q.queue, b...)
	q.mu.Unlock()
	q.signal()
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// hold makes messages wait until release (EXEC is writing its reply).
func (q *outQueue) hold() {
	q.mu.Lock()
	q.holding = true
	q.mu.Unlock()
}

// release queues the held messages after what the connection wrote, but
// those for a subscription it has ended since: they count as published
// after it ended (a message for a channel never follows the confirmation
// of its UNSUBSCRIBE).
func (q *outQueue) release(subscribed func(subKind, string) bool) {
	q.mu.Lock()
	from := 0
	for _, h := range q.heldFor {
		if subscribed(h.kind, h.name) {
			q.queue = append(q.queue, q.held[from:h.end]...)
		}
		from = h.end
	}
	q.holding, q.held, q.heldFor = false, q.held[:0], q.heldFor[:0]
	q.mu.Unlock()
	q.signal()
}

// owed is how many bytes the queue holds (CLIENT LIST omem).
func (q *outQueue) owed() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.queue) + len(q.held))
}

// run writes the queue until the queue ends, then what is left (a QUIT's
// reply) within the shutdown drain bound.
func (q *outQueue) run() {
	defer close(q.done)
	var buf []byte
	for {
		last := false
		select {
		case <-q.wake:
		case <-q.gone:
			last = true
		}
		q.mu.Lock()
		buf, q.queue = q.queue, buf[:0]
		q.mu.Unlock()
		if len(buf) > 0 {
			if _, err := q.c.nc.Write(buf); err != nil {
				q.mu.Lock()
				q.cut, q.queue, q.held, q.heldFor = true, nil, nil, nil
				q.mu.Unlock()
				q.c.kill()
				return
			}
		}
		if last {
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// startQueue makes the connection's writer own its socket, once the
// replies owed so far are written.
func (c *client) startQueue() *outQueue {
	if q := c.oq.Load(); q != nil {
		return q
	}
	c.flushOut()
	q := newOutQueue(c)
	c.oq.Store(q)
	go q.run()
	return q
}

// stopQueue gives the socket back to the connection once neither a
// monitor nor a subscription needs the writer: what is queued goes out
// first. Messages published to the connection are no longer queued by
// then (it left the monitors and the subscriptions first).
func (c *client) stopQueue() {
	q := c.oq.Load()
	if q == nil || c.monitoring.Load() || c.subsN.Load() > 0 {
		return
	}
	c.flushOut()
	close(q.gone)
	<-q.done
	c.oq.Store(nil)
}

// endQueue lets the writer of a connection that ends send what is queued,
// within the shutdown drain bound.
func (c *client) endQueue() {
	q := c.oq.Load()
	if q == nil {
		return
	}
	// A write the writer is blocked in gets the drain bound too.
	c.setWriteDeadline(time.Now().Add(ShutdownDrain))
	close(q.gone)
	<-q.done
}
