// Package server speaks RESP2 to Sluice's clients. It owns connections,
// AUTH, the command table (name, arity, flags, key positions, docs, parser),
// argument parsing into typed engine commands, reply writing, the one place
// that maps Go errors to RESP error text (errors.go), and time: it stamps
// every pipeline from its clock and ticks the backend's sweeper. Each
// connection is served by one goroutine that reads a whole pipeline, parses
// it, hands the engine commands to the Backend as one batch, and writes
// every reply in order. Server methods are safe for concurrent use.
package server

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/tidwall/redcon"
)

// The server declares what it needs from the backend it serves, in small
// interfaces; the standalone engine, persistence.Durable and
// replication.Node each satisfy Backend (pinned where they are wired, in
// cmd/sluice-server, since this package imports neither of the last two).

// Executor runs pipelines.
type Executor interface {
	// Execute fills b.Replies for b.Cmds, in order, as of now: the
	// server's clock when the pipeline arrived, never earlier than a now
	// it passed before. It returns when the replies are final (durable as
	// promised; in a cluster, committed). Called concurrently from every
	// connection, each with its own Batch.
	Execute(b *engine.Batch, now int64)
}

// Inspector answers INFO, DBSIZE, CONFIG and the metrics. Safe for
// concurrent use; values may be a moment stale.
type Inspector interface {
	Stats() engine.Stats
	// ResetStats zeroes the counters of Stats (CONFIG RESETSTAT).
	ResetStats()
	Shards() int
	MaxMemory() int64
	// SetMaxMemory serves CONFIG SET maxmemory; it takes effect for the
	// next commands.
	SetMaxMemory(n int64)
}

// Backend is what a Server serves.
type Backend interface {
	Executor
	Inspector
}

var _ Backend = (*engine.Engine)(nil)

// Sweeper is implemented by a backend whose expired records the server
// frees: Sweep is called every Config.SweepInterval with the clock's now,
// from one goroutine, and must not block. A cluster node sweeps by itself,
// at the applied time, and does not implement it.
type Sweeper interface {
	Sweep(now int64)
}

var _ Sweeper = (*engine.Engine)(nil)

// Cluster is implemented by a backend in cluster mode. Safe for concurrent
// use.
type Cluster interface {
	// ClusterView describes the group as this node sees it, for CLUSTER,
	// ROLE and INFO replication.
	ClusterView() engine.ClusterView
	// Join adds a voter; idempotent for a node already present with the
	// same addresses. Only the leader can; a follower answers with the
	// *engine.MovedError a decision would get.
	Join(id, raftAddr, clientAddr string) error
	// Forget removes a node; idempotent.
	Forget(id string) error
}

// Persister is standalone persistence, for SAVE, BGSAVE, LASTSAVE and INFO
// persistence. Safe for concurrent use.
type Persister interface {
	// Save takes a snapshot and compacts the log, returning when done.
	Save() error
	// BackgroundSave starts one and returns at once.
	BackgroundSave() error
	// LastSave is the unix time of the last successful snapshot.
	LastSave() int64
	// InfoLines are the INFO persistence section's lines.
	InfoLines() []string
}

// FsyncSetter is a Persister whose appendfsync CONFIG SET changes.
type FsyncSetter interface {
	AppendFsync() string
	SetAppendFsync(policy string) error
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
	// RequirePass, when set, is the default user's password (AUTH
	// password). Default none: the default user needs no password.
	RequirePass string
	// ACLFile, when set, is where ACL SAVE writes the users and ACL LOAD
	// (and LoadACL, at start) reads them. Default none.
	ACLFile string
	// ACL holds the users. Default: a new one with only the default user
	// (RequirePass its password). Cluster mode shares it with the node,
	// which replicates its changes.
	ACL *ACL
	// TLS, when set, is the client TLS the listeners use (the server only
	// reports and reloads it: CONFIG GET|SET tls-*). Default none.
	TLS *TLS
	// AuthMaxFailures closes a connection after this many failed AUTH
	// attempts. Default 10; negative disables.
	AuthMaxFailures int
	// MaxClients bounds concurrent connections. Default 10000.
	MaxClients int
	// Timeout closes a connection that has sent no complete command for
	// this long (Redis's timeout; 0, the default, never). Counted from the
	// last complete command, not the last byte, so that a client sending a
	// byte at a time cannot hold its connection.
	Timeout time.Duration
	// ReqIDWindow is how long a decision sent with REQID is remembered, so
	// that a retry with the same id gets the first reply and is not
	// charged again. Default engine.DefaultReqIDWindow; at most
	// engine.MaxReqIDWindow.
	ReqIDWindow time.Duration
	// Shutdown, when set, is what SHUTDOWN asks for: stop the process as
	// a SIGTERM does, with its final snapshot unless save is false. It
	// must not block.
	Shutdown func(save bool)
	// TCPKeepAlive is the TCP keepalive period of accepted connections
	// (Redis's tcp-keepalive). Default 300 s; negative disables.
	TCPKeepAlive time.Duration
	// EnableDebug gates DEBUG (the test clock). Default DebugNo.
	EnableDebug DebugMode
	// ProtoMaxBulkLen bounds one request's size in bytes. Default 512 MiB.
	ProtoMaxBulkLen int
	// OutputBufferLimits is client-output-buffer-limit. Default (nil):
	// Redis's, DefaultOutputBufferLimits. Only the normal class applies
	// (every connection is one): a connection owing its hard limit of
	// replies not yet written, or its soft limit for longer than its
	// seconds, is closed.
	OutputBufferLimits *OutputBufferLimits
	// QueryBufferLimit is client-query-buffer-limit: a connection whose
	// unprocessed input would grow past this many bytes is closed.
	// Default DefaultQueryBufferLimit (1 GiB, as Redis); the smaller of it
	// and ProtoMaxBulkLen plus 64 KiB is in force.
	QueryBufferLimit int64
	// MaxPipeline bounds how many commands one batch carries; longer
	// pipelines run as several batches. Default 1024.
	MaxPipeline int
	// Version is reported by INFO and HELLO.
	Version string
	// Settings supplies CONFIG GET values the server does not own itself
	// (port, bind, ...). May be nil.
	Settings func() map[string]string
	// OwnSettings are settings the embedding program owns that CONFIG SET
	// may change at run time (loglevel), by name. May be nil.
	OwnSettings map[string]Setting
	// Rewrite, when set, is CONFIG REWRITE: it writes the current values of
	// the run-time settings into the configuration file the server was
	// started with. Nil when there is none ("The server is running without
	// a config file", as Redis answers).
	Rewrite func(settings map[string]string) error
	// Persistence, when set, serves SAVE/BGSAVE/LASTSAVE and INFO
	// persistence.
	Persistence Persister
	// Clock stamps every pipeline, and serves TIME and DEBUG CLOCK. Share
	// it with the backend's persistence or replication, which carry
	// restored and applied times forward into it. Default: a new system
	// clock.
	Clock *clock.Clock
	// SweepInterval is how often a Sweeper backend frees expired records.
	// Default 100ms; negative disables.
	SweepInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Health is the probes' state (/healthz, /readyz, INFO health), made
	// with NewHealth before the process loads its state so that the probes
	// answer during the load; New marks it loaded. Default: a new one.
	Health *Health
	// HotKeys serves LIMIT.HOTKEYS and hotkeys-tracking. Default: the
	// backend, if it implements it (the engine does; its wrappers do not).
	HotKeys HotKeys
	// Stats holds the slow log, latency monitor and latency tracking
	// settings (cmdstats.go). Default (nil): DefaultStatsConfig, Redis's.
	Stats *StatsConfig
	// Scripts is the script cache and runner, shared with the engine
	// (engine.Config.Scripts). Default: a cache of the server's own,
	// whose scripts the engine then refuses to run.
	Scripts *Scripts
}

// Setting is one run-time setting the embedding program owns: its current
// value, and how to change it (an error refuses the value, changing
// nothing).
type Setting struct {
	Get func() string
	Set func(value string) error
}

// Server serves RESP connections against a Backend.
type Server struct {
	cfg     Config
	backend Backend
	clock   *clock.Clock
	log     *slog.Logger
	started time.Time
	// configMu makes each CONFIG SET and CONFIG REWRITE one step, as in
	// single-threaded Redis: a refused CONFIG SET puts back the values it
	// read, and must not put back over another's acknowledged change.
	configMu sync.Mutex

	requirePass atomic.Pointer[string]
	maxClients  atomic.Int64
	// authMaxFailures: failed AUTHs that close a connection; 0 never.
	authMaxFailures atomic.Int64
	idle            atomic.Int64 // Timeout in ns: CONFIG SET timeout
	keepAlive       atomic.Int64 // TCPKeepAlive in ns, <= 0 off: CONFIG SET tcp-keepalive
	reqIDWindow     atomic.Int64 // ReqIDWindow in ns: CONFIG SET reqid-window

	// CONFIG SET client-output-buffer-limit and client-query-buffer-limit,
	// and the connections closed for each.
	obuf       atomic.Pointer[OutputBufferLimits]
	qbufLimit  atomic.Int64
	obufClosed atomic.Int64
	qbufClosed atomic.Int64
	// drainBy is when Close's drain ends (unix ns; 0 before Close): a
	// write deadline set for the soft output limit may not pass it.
	drainBy atomic.Int64

	scripts *Scripts
	health  *Health
	stats   *cmdStats // per-command statistics, SLOWLOG, LATENCY

	acl            *ACL
	aclLog         aclLog
	authThrottle   *authThrottle
	authDenied     atomic.Int64
	cmdDenied      atomic.Int64
	keyDenied      atomic.Int64
	channelDenied  atomic.Int64
	authLogMu      sync.Mutex
	authLogLast    time.Time
	authLogPending int64

	mu        sync.Mutex
	listeners []net.Listener
	clients   map[int64]*client
	closing   bool
	wg        sync.WaitGroup
	stop      chan struct{} // closed by Close: stops the sweeper
	sweeperWG sync.WaitGroup

	// CLIENT PAUSE and MONITOR (clientcmd.go, monitor.go): hooks has a
	// bit set while either is active. coarseNow is the time to a tenth of
	// a second (unix ns), for what CLIENT LIST shows in seconds: reading it
	// costs a connection's read a load, where time.Now costs about 100 ns
	// on a virtual machine. Every read loads both: they sit on a cache
	// line of their own, away from the counters every read increments.
	_         [64]byte
	hooks     atomic.Uint32
	coarseNow atomic.Int64
	_         [64]byte
	pause     pauseState
	monitors  monitorSet
	pubsub    pubsubHub

	nextID      atomic.Int64
	connections atomic.Int64 // total accepted
	rejected    atomic.Int64
	commandsN   atomic.Int64
}

// New returns a server for backend and starts its sweeper (if the backend
// is a Sweeper). Close stops it.
func New(cfg Config, backend Backend) *Server {
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 10000
	}
	if cfg.TCPKeepAlive == 0 {
		cfg.TCPKeepAlive = 300 * time.Second
	}
	if cfg.ProtoMaxBulkLen <= 0 {
		cfg.ProtoMaxBulkLen = 512 << 20
	}
	if cfg.OutputBufferLimits == nil {
		def := DefaultOutputBufferLimits()
		cfg.OutputBufferLimits = &def
	}
	if cfg.QueryBufferLimit <= 0 {
		cfg.QueryBufferLimit = DefaultQueryBufferLimit
	}
	if cfg.MaxPipeline <= 0 {
		cfg.MaxPipeline = 1024
	}
	if cfg.ReqIDWindow <= 0 {
		cfg.ReqIDWindow = time.Duration(engine.DefaultReqIDWindow)
	}
	cfg.ReqIDWindow = min(cfg.ReqIDWindow, time.Duration(engine.MaxReqIDWindow))
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New(nil)
	}
	if cfg.AuthMaxFailures == 0 {
		cfg.AuthMaxFailures = defaultAuthMaxFailures
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 100 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, backend: backend, clock: cfg.Clock, log: log, started: time.Now(),
		clients: map[int64]*client{}, stop: make(chan struct{}),
		acl: cfg.ACL, authThrottle: newAuthThrottle(), scripts: cfg.Scripts, stats: newCmdStats(cfg.Stats)}
	if s.scripts == nil {
		s.scripts = NewScripts(log)
	}
	if s.acl == nil {
		s.acl = NewACL(cfg.RequirePass)
	}
	s.health = cfg.Health
	if s.health == nil {
		s.health = NewHealth(HealthConfig{})
	}
	s.scripts.acl.Store(s.acl)
	s.scripts.server.Store(s)
	gone := s.disconnectUsers
	s.acl.onGone.Store(&gone)
	pass := cfg.RequirePass
	s.requirePass.Store(&pass)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.authMaxFailures.Store(int64(max(cfg.AuthMaxFailures, 0)))
	s.idle.Store(int64(cfg.Timeout))
	s.keepAlive.Store(int64(cfg.TCPKeepAlive))
	s.reqIDWindow.Store(int64(cfg.ReqIDWindow))
	obuf := *cfg.OutputBufferLimits
	s.obuf.Store(&obuf)
	s.qbufLimit.Store(cfg.QueryBufferLimit)
	s.coarseNow.Store(time.Now().UnixNano())
	s.sweeperWG.Add(1)
	go s.tickCoarse()
	if sw, ok := backend.(Sweeper); ok && cfg.SweepInterval > 0 {
		s.sweeperWG.Add(1)
		go s.sweep(sw)
	}
	s.health.attach(s)
	return s
}

// LoadACL loads the users from Config.ACLFile, replacing the default user
// if the file defines it. Call it before serving; an error names the file
// and every bad line.
//
// In cluster mode the users are the group's, from its log and snapshots, and
// the file is not read at start: ACL LOAD on a running node sends the file
// to every member.
func (s *Server) LoadACL() error {
	if _, ok := s.replicator(); ok || s.cfg.ACLFile == "" {
		return nil
	}
	return s.aclLoad()
}

// sweep frees expired records every SweepInterval until Close.
func (s *Server) sweep(sw Sweeper) {
	defer s.sweeperWG.Done()
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			sw.Sweep(s.clock.Now())
		}
	}
}

// redisVersion is the Redis version Sluice answers as (HELLO, INFO): the
// one whose commands, replies and errors it copies.
const redisVersion = "7.2.0"

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
		nc.Write(redcon.AppendError(nil, errorText(errMaxClt)))
		nc.Close()
		return
	}
	if d := time.Duration(s.keepAlive.Load()); d > 0 {
		setKeepAlive(nc, d)
	}
	cl := newClient(s, nc)
	s.clients[cl.id] = cl
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		cl.serve()
	}()
}

// unlist removes a connection that is ending from the server's clients.
func (s *Server) unlist(c *client) {
	s.mu.Lock()
	delete(s.clients, c.id)
	s.mu.Unlock()
}

// ShutdownDrain bounds how long Close waits for a connection to take the
// replies it is owed: past it, a client that does not read is cut off.
const ShutdownDrain = 2 * time.Second

// Close stops accepting, lets every connection finish the pipeline it is
// executing and flush its replies, closes the connections, stops the
// sweeper, and waits for all of them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.wg.Wait()
		s.sweeperWG.Wait()
		return nil
	}
	s.closing = true
	s.health.stopping.Store(true) // /readyz: 503 while the connections drain
	s.drainBy.Store(time.Now().Add(ShutdownDrain).UnixNano())
	close(s.stop)
	for _, ln := range s.listeners {
		ln.Close()
	}
	for _, cl := range s.clients {
		cl.interrupt()
	}
	s.mu.Unlock()
	// A connection waits for its script: stop the busy ones that may be
	// stopped (those that wrote run to their end).
	s.scripts.shutdown()
	s.wg.Wait()
	s.sweeperWG.Wait()
	return nil
}

// stampReqID gives a decision's request id the receipt lifetime in force
// now. It travels in the command, so a replay or a replica keeps the
// receipt exactly as long as this node does.
func (s *Server) stampReqID(ec *engine.Command) {
	if len(ec.ReqID) > 0 {
		ec.ReqTTL = s.reqIDWindow.Load()
	}
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

// blockedClients counts the connections CLIENT PAUSE holds: what Redis's
// INFO blocked_clients counts for them (Sluice has no blocking commands).
func (s *Server) blockedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.clients {
		if c.held.Load() {
			n++
		}
	}
	return n
}

// setKeepAlive turns TCP keepalive on for nc (under TLS, its TCP
// connection) with period d.
func setKeepAlive(nc net.Conn, d time.Duration) {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(d)
	}
}
