// Package server speaks RESP2 to Sluice's clients. It owns connections,
// AUTH, the command table (name, arity, flags, key positions, docs, parser),
// argument parsing into typed engine commands, reply writing, and the one
// place that maps Go errors to RESP error text. Each connection is served by
// one goroutine that reads a whole pipeline, parses it, hands the engine
// commands to the Backend as one batch, and writes every reply in order.
// Server methods are safe for concurrent use.
package server

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Backend executes engine batches. The standalone engine satisfies it; a
// replicated node will too, so this package never imports replication.
type Backend interface {
	Execute(b *engine.Batch)
	Clock() *engine.Clock
	Stats() engine.Stats
	Keys() int64
	Shards() int
	UsedMemory() int64
	MaxMemory() int64
	SetMaxMemory(n int64)
}

var _ Backend = (*engine.Engine)(nil)

// Persister is standalone persistence, for SAVE, BGSAVE, LASTSAVE and INFO
// persistence. nil means persistence is off.
type Persister interface {
	Save() error
	BackgroundSave() error
	LastSave() int64
	InfoLines() []string
}

// DebugMode says who may run DEBUG.
type DebugMode int

// Debug modes, as Redis's enable-debug-command.
const (
	DebugNo    DebugMode = iota // nobody
	DebugYes                    // everybody
	DebugLocal                  // loopback clients only
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// RequirePass, when set, is the password AUTH must present. Default none.
	RequirePass string
	// MaxClients bounds concurrent connections. Default 10000.
	MaxClients int
	// EnableDebug gates DEBUG (the test clock). Default DebugNo.
	EnableDebug DebugMode
	// ProtoMaxBulkLen bounds one request's size in bytes. Default 512 MiB.
	ProtoMaxBulkLen int
	// MaxPipeline bounds how many commands one batch carries; longer
	// pipelines run as several batches. Default 1024.
	MaxPipeline int
	// Version is reported by INFO and HELLO.
	Version string
	// Settings supplies CONFIG GET values the server does not own itself
	// (port, bind, ...). May be nil.
	Settings func() map[string]string
	// Persistence, when set, serves SAVE/BGSAVE/LASTSAVE and INFO
	// persistence.
	Persistence Persister
	// Logger; nil discards.
	Logger *slog.Logger
}

// Server serves RESP connections against a Backend.
type Server struct {
	cfg     Config
	backend Backend
	log     *slog.Logger
	started time.Time

	requirePass atomic.Pointer[string]
	maxClients  atomic.Int64

	mu        sync.Mutex
	listeners []net.Listener
	clients   map[int64]*client
	closing   bool
	wg        sync.WaitGroup

	nextID      atomic.Int64
	connections atomic.Int64 // total accepted
	rejected    atomic.Int64
	commandsN   atomic.Int64
}

// New returns a server for backend.
func New(cfg Config, backend Backend) *Server {
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 10000
	}
	if cfg.ProtoMaxBulkLen <= 0 {
		cfg.ProtoMaxBulkLen = 512 << 20
	}
	if cfg.MaxPipeline <= 0 {
		cfg.MaxPipeline = 1024
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, backend: backend, log: log, started: time.Now(), clients: map[int64]*client{}}
	pass := cfg.RequirePass
	s.requirePass.Store(&pass)
	s.maxClients.Store(int64(cfg.MaxClients))
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("server closed")

// Serve accepts connections on ln until Close. It always returns a non-nil
// error: ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		s.accept(nc)
	}
}

func (s *Server) accept(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		nc.Close()
		return
	}
	s.connections.Add(1)
	if int64(len(s.clients)) >= s.maxClients.Load() {
		s.rejected.Add(1)
		nc.Write([]byte("-ERR " + errMaxClt.Error() + "\r\n"))
		nc.Close()
		return
	}
	cl := newClient(s, nc)
	s.clients[cl.id] = cl
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		cl.serve()
		s.mu.Lock()
		delete(s.clients, cl.id)
		s.mu.Unlock()
	}()
}

// Close stops accepting, lets every connection finish the pipeline it is
// executing and flush its replies, closes the connections, and waits.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closing = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	for _, cl := range s.clients {
		cl.interrupt()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// ConnectedClients is the number of open connections.
func (s *Server) ConnectedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}
