// Command sluice-server runs the Sluice rate-limit server.
//
// Configuration follows redis-server: an optional config file path as the
// first argument, then --name value flags that override it, with the same
// names in both:
//
//	sluice-server [/path/to/sluice.conf] [--port 6379] [--bind 127.0.0.1] ...
//
// With no configuration at all it listens on 127.0.0.1:6379.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/persistence"
	"github.com/sluicehq/sluice/replication"
	"github.com/sluicehq/sluice/server"
)

// The backends the server is wired to, pinned to the interfaces it
// declares (server cannot import persistence or replication to pin them).
var (
	_ server.Backend    = (*persistence.Durable)(nil)
	_ server.Sweeper    = (*persistence.Durable)(nil)
	_ server.Persister  = (*persistence.Durable)(nil)
	_ server.Backend    = (*replication.Groups)(nil)
	_ server.Cluster    = (*replication.Groups)(nil)
	_ server.Replicator = (*replication.Groups)(nil)
	_ server.RaftHealth = (*replication.Groups)(nil)

	_ replication.ReplicatedState = (*server.ACL)(nil)
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

type options struct {
	busyMS          int
	scriptAccel     string
	hotKeys         string
	port            portFlag
	tlsPort         portFlag
	tls             server.TLSFiles
	tlsCluster      string
	tlsRepl         string
	bind            string
	requirePass     string
	aclFile         string
	authMaxFailures int
	maxMemory       string
	maxClients      int
	idleTimeout     int
	reqIDWindow     int
	tcpKeepAlive    int
	obufLimits      server.OutputBufferLimits
	queryBufLimit   string
	stats           server.StatsConfig
	shards          int
	debug           string
	logLevel        string
	dir             string
	appendOnly      string
	appendFsync     string
	rewritePct      int
	rewriteMin      string
	checkLog        string
	fix             bool

	clusterEnabled    string
	clusterNodeID     string
	clusterRaftAddr   string
	clusterAnnounce   string
	clusterRaftAnn    string
	clusterBootstrap  string
	clusterJoin       string
	clusterSecret     string
	clusterSecretFile string
	genCertsDir       string
	certHosts         string
	masterUser        string
	masterAuth        string
	clusterHeartbeat  time.Duration
	clusterElection   time.Duration
	clusterLease      time.Duration
	clusterGroups     int
	clusterReplicas   int
	metricsAddr       string
	readyMaxApplyLag  uint64
	readyMaxContact   time.Duration
	keyLoadDelay      int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// statsFlag is one server.StatsConfig setting as a flag: its default is
// known (CONFIG REWRITE leaves defaults out) and Set parses it as CONFIG
// SET does.
type statsFlag struct {
	c    *server.StatsConfig
	name string
}

func (f statsFlag) String() string {
	if f.c == nil {
		return ""
	}
	return f.c.Get(f.name)
}
func (f statsFlag) Set(v string) error { return f.c.Set(f.name, v) }

func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice-server", flag.ContinueOnError)
	fs.SetOutput(out)
	o.port = portFlag{n: 6379}
	fs.Var(&o.port, "port", "TCP port for plain connections (0: none, as Redis; auto: a free port, named in the ready line)")
	fs.Var(&o.tlsPort, "tls-port", "TCP port for TLS connections (0: none; auto: a free port)")
	fs.StringVar(&o.tls.CertFile, "tls-cert-file", "", "the server's TLS certificate (PEM)")
	fs.StringVar(&o.tls.KeyFile, "tls-key-file", "", "its private key (PEM)")
	fs.StringVar(&o.tls.CAFile, "tls-ca-cert-file", "", "CA certificates that client (and cluster member) certificates are checked against")
	fs.StringVar(&o.tls.AuthClients, "tls-auth-clients", "yes", "require client certificates: yes, optional or no")
	fs.StringVar(&o.tls.Protocols, "tls-protocols", "", "TLS versions, space separated: TLSv1.2 TLSv1.3 (default both)")
	fs.StringVar(&o.tls.Ciphers, "tls-ciphers", "", "TLS 1.2 cipher suites, colon separated IANA names (default: Go's secure set)")
	fs.StringVar(&o.tls.CipherSuites, "tls-ciphersuites", "", "TLS 1.3 cipher suites (Go always offers all three)")
	fs.StringVar(&o.tlsCluster, "tls-cluster", "no", "Raft traffic between members over mutual TLS with the tls-* files: yes or no")
	fs.StringVar(&o.tlsRepl, "tls-replication", "no", "connect to other members' client ports (--cluster-join) over TLS: yes or no")
	fs.StringVar(&o.bind, "bind", "127.0.0.1", "addresses to listen on, space separated")
	fs.StringVar(&o.requirePass, "requirepass", "", "the default user's password, for AUTH password (empty: none)")
	fs.StringVar(&o.aclFile, "aclfile", "", "file of ACL users, loaded at start and by ACL LOAD, written by ACL SAVE (empty: none)")
	fs.IntVar(&o.authMaxFailures, "auth-max-failures", 10, "close a connection after this many failed AUTH attempts (0: never)")
	fs.StringVar(&o.maxMemory, "maxmemory", "0", "memory limit for stored state (e.g. 512mb; 0: none); past it new state gets -OOM")
	fs.IntVar(&o.maxClients, "maxclients", 10000, "maximum concurrent connections")
	fs.IntVar(&o.idleTimeout, "timeout", 0, "close a connection that sends no complete command for this many seconds (0: never)")
	fs.IntVar(&o.reqIDWindow, "reqid-window", 10, "seconds a decision sent with REQID is remembered for its retries (1 to 3600)")
	fs.IntVar(&o.tcpKeepAlive, "tcp-keepalive", 300, "TCP keepalive period of client connections, in seconds (0: off)")
	o.obufLimits = server.DefaultOutputBufferLimits()
	fs.Var(&o.obufLimits, "client-output-buffer-limit", "<class> <hard> <soft> <soft-seconds>, repeated, as Redis; classes normal, replica, pubsub (only normal applies); 0 no limit")
	fs.StringVar(&o.queryBufLimit, "client-query-buffer-limit", "1gb", "close a connection whose unprocessed input passes this size (at least 1mb)")
	fs.IntVar(&o.busyMS, "busy-reply-threshold", int(server.DefaultBusyThreshold.Milliseconds()), "ms a script may run before its shards answer BUSY and SCRIPT KILL may stop it (alias lua-time-limit; 0: never)")
	fs.IntVar(&o.busyMS, "lua-time-limit", int(server.DefaultBusyThreshold.Milliseconds()), "alias of busy-reply-threshold")
	fs.StringVar(&o.scriptAccel, "script-acceleration", "yes", "run known limiter scripts natively (docs/scripting.md): yes or no")
	fs.StringVar(&o.hotKeys, "hotkeys-tracking", "yes", "track the hottest keys by decisions and refusals (LIMIT.HOTKEYS, OBJECT FREQ): yes or no (about 1% of a decision's CPU; no frees the sketches)")
	fs.IntVar(&o.shards, "shards", 0, "number of shards, rounded up to a power of two (0: 4 x GOMAXPROCS)")
	fs.StringVar(&o.debug, "enable-debug-command", "no", "allow DEBUG (the test clock): no, yes or local")
	fs.StringVar(&o.logLevel, "loglevel", "notice", "debug, verbose, notice or warning")
	fs.StringVar(&o.dir, "dir", ".", "directory for the append-only file and snapshots")
	fs.StringVar(&o.appendOnly, "appendonly", "yes", "persist every state change to an append-only file: yes or no")
	fs.StringVar(&o.appendFsync, "appendfsync", "everysec", "always (reply after fsync, group commit), everysec or no")
	fs.IntVar(&o.rewritePct, "auto-aof-rewrite-percentage", 100, "snapshot and start a new log when it grew this many percent since the last snapshot (0 disables)")
	fs.StringVar(&o.rewriteMin, "auto-aof-rewrite-min-size", "64mb", "never rewrite a smaller log")
	fs.StringVar(&o.checkLog, "check-log", "", "check an append-only file and exit (like redis-check-aof)")
	fs.BoolVar(&o.fix, "fix", false, "with --check-log: rewrite the file keeping every intact record (a torn end is cut off)")
	fs.StringVar(&o.clusterEnabled, "cluster-enabled", "no", "run as a member of a Raft group: yes or no")
	fs.StringVar(&o.clusterNodeID, "cluster-node-id", "", "this node's id (40 hex characters; default: stored in --dir, or generated)")
	fs.StringVar(&o.clusterRaftAddr, "cluster-raft-addr", "", "host:port the Raft transport binds (default: bind address, client port+10000; a free port when the client port is auto)")
	fs.StringVar(&o.clusterRaftAnn, "cluster-announce-raft-addr", "", "host:port other members dial for Raft (default: the bound Raft address)")
	fs.StringVar(&o.clusterAnnounce, "cluster-announce-addr", "", "client host:port this node announces in MOVED and CLUSTER replies (default: the listening address)")
	fs.StringVar(&o.clusterBootstrap, "cluster-bootstrap", "no", "yes on the first node of a new group")
	fs.StringVar(&o.clusterJoin, "cluster-join", "", "client address of any member: ask it to add this node")
	fs.StringVar(&o.clusterSecret, "cluster-secret", "", "shared secret every member proves on every Raft connection (at least 16 bytes; TLS is the production setting)")
	fs.StringVar(&o.clusterSecretFile, "cluster-secret-file", "", "file holding the cluster secret")
	fs.StringVar(&o.genCertsDir, "cluster-gen-certs", "", "write a cluster CA and a node certificate into DIR (or, if DIR has the CA, one more node certificate) and exit")
	fs.StringVar(&o.certHosts, "cluster-cert-hosts", "", "hosts (IPs, names) the generated node certificate is valid for, space separated (default 127.0.0.1 localhost)")
	fs.StringVar(&o.masterUser, "masteruser", "", "ACL user this node authenticates as when it asks a member to let it join (default: the default user)")
	fs.StringVar(&o.masterAuth, "masterauth", "", "that user's password (default: requirepass)")
	fs.DurationVar(&o.clusterHeartbeat, "cluster-heartbeat-timeout", replication.DefaultHeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&o.clusterElection, "cluster-election-timeout", replication.DefaultElectionTimeout, "Raft election timeout")
	fs.DurationVar(&o.clusterLease, "cluster-lease-timeout", replication.DefaultLeaderLease, "Raft leader lease")
	fs.IntVar(&o.clusterGroups, "cluster-groups", 0, "on the bootstrap node: the number of Raft groups the slots are split over, each with its own leader (default 1; a joining node takes the cluster's)")
	fs.IntVar(&o.clusterReplicas, "cluster-replicas-per-group", replication.DefaultReplicasPerGroup, "voters each Raft group keeps; further members follow it without a vote")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics and the health probes over HTTP at host:port: /metrics, /healthz, /readyz (empty: off)")
	fs.Uint64Var(&o.readyMaxApplyLag, "ready-max-apply-lag", server.DefaultReadyMaxApplyLag, "cluster mode: /readyz fails while this node's applied index is more than this many entries behind its commit index")
	fs.DurationVar(&o.readyMaxContact, "ready-max-last-contact", server.DefaultReadyMaxLastContact, "cluster mode: /readyz fails on a follower that has not heard from a leader for longer")
	fs.IntVar(&o.keyLoadDelay, "key-load-delay", 0, "test aid, as Redis's: load persisted state no faster than one record per this many microseconds")
	o.stats = server.DefaultStatsConfig()
	for _, s := range []struct{ name, usage string }{
		{"slowlog-log-slower-than", "log commands taking this many microseconds or more in SLOWLOG (-1: none, 0: all)"},
		{"slowlog-max-len", "SLOWLOG entries kept"},
		{"latency-monitor-threshold", "LATENCY records command events of this many milliseconds or more (0: off)"},
		{"latency-tracking", "per-command latency histograms (INFO latencystats, sluice_command_duration_seconds): yes or no"},
		{"latency-tracking-info-percentiles", "percentiles INFO latencystats reports, space separated"},
	} {
		fs.Var(statsFlag{&o.stats, s.name}, s.name, s.usage)
	}
	return fs
}

// loadConfigFile applies "name value" lines to the flag set.
func loadConfigFile(path string, fs *flag.FlagSet) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value, _ := strings.Cut(text, " ")
		value = strings.Trim(strings.TrimSpace(value), `"`)
		if err := fs.Set(strings.ToLower(name), value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, line, name, err)
		}
	}
	return sc.Err()
}

func debugMode(v string) (server.DebugMode, error) {
	switch strings.ToLower(v) {
	case "no":
		return server.DebugNo, nil
	case "yes":
		return server.DebugYes, nil
	case "local":
		return server.DebugLocal, nil
	}
	return 0, fmt.Errorf("enable-debug-command must be no, yes or local, not %q", v)
}

func run(args []string, stderr io.Writer) int {
	var o options
	fs := newFlagSet(&o, stderr)
	configPath := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		// Absolute, so that CONFIG REWRITE finds it whatever the
		// working directory has become.
		configPath, _ = filepath.Abs(args[0])
		if err := loadConfigFile(args[0], fs); err != nil {
			fmt.Fprintf(stderr, "sluice-server: config file: %v\n", err)
			return 2
		}
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	// A heartbeat timeout set alone carries the election timeout and the
	// lease with it: Raft wants an election timeout no shorter than the
	// heartbeat's, and the lease is kept at half of it (replication's
	// defaults, replication/DESIGN.md).
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["cluster-heartbeat-timeout"] {
		if !given["cluster-election-timeout"] {
			o.clusterElection = max(o.clusterElection, o.clusterHeartbeat)
		}
		if !given["cluster-lease-timeout"] {
			o.clusterLease = o.clusterHeartbeat / 2
		}
	}
	if o.checkLog != "" {
		return checkLog(o.checkLog, o.fix, stderr)
	}
	if o.genCertsDir != "" {
		return genCerts(o.genCertsDir, o.certHosts, stderr)
	}
	level, err := server.ParseLogLevel(o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-server: %v\n", err)
		return 2
	}
	if o.reqIDWindow < 1 || o.reqIDWindow > 3600 {
		fmt.Fprintf(stderr, "sluice-server: reqid-window must be 1 to 3600 seconds, not %d\n", o.reqIDWindow)
		return 2
	}
	// A LevelVar, so that CONFIG SET loglevel changes it at run time.
	var levelVar slog.LevelVar
	levelVar.Set(level)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: &levelVar}))
	maxMemory, err := server.ParseMemory(o.maxMemory)
	if err != nil {
		log.Error("bad maxmemory", "err", err)
		return 2
	}
	queryBufLimit, err := server.ParseQueryBufferLimit(o.queryBufLimit)
	if err != nil {
		log.Error("bad client-query-buffer-limit", "err", err)
		return 2
	}
	dbg, err := debugMode(o.debug)
	if err != nil {
		log.Error("bad enable-debug-command", "err", err)
		return 2
	}
	if o.readyMaxApplyLag == 0 || o.readyMaxContact <= 0 || o.keyLoadDelay < 0 {
		log.Error("ready-max-apply-lag and ready-max-last-contact must be positive, key-load-delay not negative",
			"ready-max-apply-lag", o.readyMaxApplyLag, "ready-max-last-contact", o.readyMaxContact, "key-load-delay", o.keyLoadDelay)
		return 2
	}

	var clientTLS *server.TLS
	if o.tlsPort.on() || strings.EqualFold(o.tlsCluster, "yes") {
		if clientTLS, err = server.NewTLS(o.tls); err != nil {
			log.Error("bad TLS settings", "err", err)
			return 2
		}
	}
	listeners, tlsListeners, err := listen(o, clientTLS)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	all := append(append([]net.Listener{}, listeners...), tlsListeners...)
	if len(all) == 0 {
		log.Error("Configured to not listen anywhere, exiting.", "bind", o.bind, "port", o.port.String(), "tls-port", o.tlsPort.String())
		return 2
	}
	// The address this node announces and tools read: the first plain
	// listener, or the first TLS one when there is none.
	primary := all[0].Addr().String()

	// The probes answer before the state loads: /healthz 200 at once,
	// /readyz 503 until server.New below marks the load done.
	health := server.NewHealth(server.HealthConfig{MaxApplyLag: o.readyMaxApplyLag, MaxLastContact: o.readyMaxContact})
	if o.metricsAddr != "" {
		metricsSrv, err := serveMetrics(o.metricsAddr, health, log)
		if err != nil {
			log.Error("cannot listen for metrics", "addr", o.metricsAddr, "err", err)
			return 1
		}
		// Last: the probes answer 503 "shutting down" while the rest stops.
		defer metricsSrv.Close()
	}

	// One clock for the process: the server stamps pipelines with it, and
	// recovery and replication carry the times they restore into it.
	clk := clock.New(nil)
	// The users: in cluster mode the node replicates them.
	acl := server.NewACL(o.requirePass)
	// Scripts: the server's cache and the engine's runner, one object.
	scripts := server.NewScripts(log)
	scripts.SetBusyThreshold(time.Duration(max(o.busyMS, 0)) * time.Millisecond)
	switch strings.ToLower(o.scriptAccel) {
	case "yes":
	case "no":
		scripts.SetAcceleration(false)
	default:
		log.Error("script-acceleration must be yes or no", "value", o.scriptAccel)
		return 2
	}
	hotKeys, err := server.ParseYesNo(o.hotKeys)
	if err != nil {
		log.Error("hotkeys-tracking must be yes or no", "value", o.hotKeys)
		return 2
	}
	clusterMode := strings.EqualFold(o.clusterEnabled, "yes")
	groups := 1
	if clusterMode {
		if groups, err = clusterGroups(o, log); err != nil {
			log.Error("cannot start cluster mode", "err", err)
			return 1
		}
	}
	// One engine per Raft group: each group's log, snapshots and sweeps
	// cover its own keys only.
	engines := make([]*engine.Engine, groups)
	for g := range engines {
		cfg := engine.Config{Shards: o.shards, MaxMemory: maxMemory, Logger: log, Scripts: scripts, HotKeysOff: !hotKeys}
		if groups > 1 {
			cfg.Slots = replication.GroupSlots(g, groups)
		}
		engines[g] = engine.New(cfg)
	}
	eng := engines[0]
	var backend server.Backend = eng
	var node *replication.Groups
	var durable *persistence.Durable
	var hotKeySource server.HotKeys = eng
	if clusterMode {
		// The Raft log is the journal: --appendonly does not apply.
		node, err = openNode(o, engines, clk, acl, primary, log)
		if err != nil {
			log.Error("cannot start cluster mode", "err", err)
			closeEngines(engines)
			return 1
		}
		backend, hotKeySource = node, node
	} else if durable, err = openDurable(o, eng, clk, log); err != nil {
		log.Error("cannot recover persisted state; not starting", "dir", o.dir, "err", err)
		closeEngines(engines)
		return 1
	}
	var persister server.Persister
	if durable != nil {
		backend, persister = durable, durable
	}
	shutdownReq := make(chan bool, 1) // SHUTDOWN: the final snapshot or not
	srv := server.New(server.Config{
		ACL:         acl,
		Health:      health,
		Scripts:     scripts,
		HotKeys:     hotKeySource,
		TLS:         clientTLS,
		Clock:       clk,
		Persistence: persister,
		RequirePass: o.requirePass,
		ACLFile:     o.aclFile,
		AuthMaxFailures: func() int {
			if o.authMaxFailures <= 0 {
				return -1 // never
			}
			return o.authMaxFailures
		}(),
		MaxClients:  o.maxClients,
		Timeout:     time.Duration(o.idleTimeout) * time.Second,
		ReqIDWindow: time.Duration(o.reqIDWindow) * time.Second,
		Shutdown: func(save bool) {
			select {
			case shutdownReq <- save:
			default: // one is under way
			}
		},
		OutputBufferLimits: &o.obufLimits,
		Stats:              &o.stats,
		QueryBufferLimit:   queryBufLimit,
		TCPKeepAlive: func() time.Duration {
			if o.tcpKeepAlive <= 0 {
				return -1 // off
			}
			return time.Duration(o.tcpKeepAlive) * time.Second
		}(),
		EnableDebug: dbg,
		Version:     version,
		Logger:      log,
		OwnSettings: map[string]server.Setting{
			"loglevel": server.LogLevelSetting(&levelVar),
		},
		Rewrite: rewriter(configPath, fs),
		Settings: func() map[string]string {
			v := map[string]string{"port": o.port.String(), "tls-port": o.tlsPort.String(), "bind": o.bind,
				"aclfile": o.aclFile, "tls-cluster": o.tlsCluster, "tls-replication": o.tlsRepl,
				"ready-max-apply-lag": strconv.FormatUint(o.readyMaxApplyLag, 10), "ready-max-last-contact": o.readyMaxContact.String()}
			if node != nil {
				v["cluster-raft-addr"] = node.RaftAddr()
			}
			return v
		},
	}, backend)

	if err := srv.LoadACL(); err != nil {
		log.Error("cannot load the ACL file; not starting", "aclfile", o.aclFile, "err", err)
		srv.Close()
		closeBackend(node, durable, engines, log, true)
		return 1
	}

	addrs, tlsAddrs := addrsOf(listeners), addrsOf(tlsListeners)
	log.Info("Sluice starting", "version", version, "addr", strings.Join(addrs, ","), "tls_addr", strings.Join(tlsAddrs, ","),
		"shards", eng.Shards(), "maxmemory", maxMemory, "debug_command", o.debug, "auth", o.requirePass != "" || o.aclFile != "",
		"appendonly", o.appendOnly)

	serveErr := make(chan error, len(all))
	for _, ln := range all {
		go func() { serveErr <- srv.Serve(ln) }()
	}
	// Tests and tools read the addresses from this line.
	ready := []any{"addr", primary}
	if len(tlsAddrs) > 0 {
		ready = append(ready, "tls_addr", tlsAddrs[0])
	}
	log.Info("Ready to accept connections", ready...)
	if clusterMode && o.clusterJoin != "" {
		go func() {
			if err := joinCluster(o, node, log); err != nil {
				log.Error("could not join the cluster", "via", o.clusterJoin, "err", err)
			}
		}()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	code, snapshot := 0, true
wait:
	for {
		select {
		case save := <-shutdownReq:
			log.Info("SHUTDOWN, shutting down", "final_snapshot", save)
			snapshot = save
			break wait
		case s := <-sig:
			if s == syscall.SIGHUP {
				// As Redis's CONFIG SET tls-*: new connections get the
				// reloaded files, open ones keep theirs.
				if clientTLS != nil {
					if err := clientTLS.Reload(clientTLS.Files()); err != nil {
						log.Error("SIGHUP: TLS files not reloaded; the old ones stay in force", "err", err)
					} else {
						log.Info("SIGHUP: TLS certificates reloaded")
					}
				}
				continue
			}
			log.Info("received signal, shutting down", "signal", s.String())
			break wait
		case err := <-serveErr:
			log.Error("listener failed", "err", err)
			code = 1
			break wait
		}
	}
	srv.Close()
	closeBackend(node, durable, engines, log, snapshot)
	log.Info("Sluice is now ready to exit, bye bye...")
	return code
}

// serveMetrics starts the metrics listener: /metrics, /healthz, /readyz.
func serveMetrics(addr string, health *server.Health, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: health.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	// Tests and tools read the address from this line.
	log.Info("serving Prometheus metrics and health probes", "metrics_addr", ln.Addr().String(), "paths", "/metrics,/healthz,/readyz")
	return hs, nil
}

// closeBackend stops what serves the server, outermost first: the cluster
// node or the durable log (a final snapshot), then the engine.
func closeBackend(node *replication.Groups, durable *persistence.Durable, engines []*engine.Engine, log *slog.Logger, snapshot bool) {
	if node != nil {
		if err := node.Close(); err != nil {
			log.Error("closing the cluster node", "err", err)
		}
	}
	if durable != nil {
		closeDurable := durable.Close
		if !snapshot {
			closeDurable = durable.CloseWithoutSnapshot
		}
		if err := closeDurable(); err != nil {
			log.Error("final snapshot failed; the append-only file still has everything", "err", err)
		}
	}
	closeEngines(engines)
}

func closeEngines(engines []*engine.Engine) {
	for _, e := range engines {
		e.Close()
	}
}

// openDurable recovers state from --dir and attaches the append-only file,
// unless --appendonly no.
func openDurable(o options, eng *engine.Engine, clk *clock.Clock, log *slog.Logger) (*persistence.Durable, error) {
	switch strings.ToLower(o.appendOnly) {
	case "no":
		return nil, nil
	case "yes":
	default:
		return nil, fmt.Errorf("appendonly must be yes or no, not %q", o.appendOnly)
	}
	policy, err := persistence.ParseFsyncPolicy(o.appendFsync)
	if err != nil {
		return nil, err
	}
	minSize, err := server.ParseMemory(o.rewriteMin)
	if err != nil {
		return nil, err
	}
	pct := o.rewritePct
	if pct == 0 {
		pct = -1
	}
	d, err := persistence.OpenDurable(eng, persistence.DurableConfig{
		Dir: o.dir, Fsync: policy, AutoRewritePercent: pct, AutoRewriteMinSize: minSize, Clock: clk, Logger: log,
		KeyLoadDelay: time.Duration(o.keyLoadDelay) * time.Microsecond,
	})
	if err != nil {
		return nil, err
	}
	r := d.Load()
	log.Info("DB loaded from disk", "dir", o.dir, "snapshot_keys", r.SnapshotKeys, "log_records", r.LogRecords,
		"torn_bytes_dropped", r.TornBytes, "seconds", r.Duration.Seconds(), "appendfsync", policy.String())
	return d, nil
}

// checkLog is the repair tool: report the file's state, and with --fix
// repair it (persistence.CheckLog).
func checkLog(path string, fix bool, out io.Writer) int {
	report, err := persistence.CheckLog(path, fix)
	if err != nil {
		fmt.Fprintf(out, "sluice-server --check-log: %v\n", err)
		return 1
	}
	fmt.Fprintln(out, report.String())
	if !report.OK() && !report.Truncated && !report.Salvaged {
		return 1
	}
	return 0
}

// openNode starts this process's Raft member.
func openNode(o options, engines []*engine.Engine, clk *clock.Clock, acl *server.ACL, listenAddr string, log *slog.Logger) (*replication.Groups, error) {
	raftAddr := o.clusterRaftAddr
	if raftAddr == "" {
		host, _, _ := net.SplitHostPort(listenAddr)
		port := 0 // a free port, when the client port is auto
		if p := o.port; p.n != 0 || o.tlsPort.n != 0 {
			if p.n == 0 {
				p = o.tlsPort
			}
			if !p.auto {
				port = p.n + 10000
			}
		}
		raftAddr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	announce := o.clusterAnnounce
	if announce == "" {
		announce = listenAddr
	}
	peerTLS, secret, err := peerCredentials(o)
	if err != nil {
		return nil, err
	}
	node, err := replication.OpenGroups(replication.Config{
		ID:                 o.clusterNodeID,
		Dir:                raftDir(o),
		RaftAddr:           raftAddr,
		AdvertiseRaftAddr:  o.clusterRaftAnn,
		ClientAddr:         announce,
		Bootstrap:          strings.EqualFold(o.clusterBootstrap, "yes"),
		HeartbeatTimeout:   o.clusterHeartbeat,
		ElectionTimeout:    o.clusterElection,
		LeaderLeaseTimeout: o.clusterLease,
		PeerTLS:            peerTLS,
		Secret:             secret,
		Clock:              clk,
		State:              acl,
		Logger:             log,
	}, replication.GroupsConfig{Replicas: o.clusterReplicas}, engines)
	if err != nil {
		return nil, err
	}
	log.Info("cluster mode", "node_id", node.ID(), "raft_addr", node.RaftAddr(), "client_addr", node.ClientAddr(),
		"bootstrap", o.clusterBootstrap, "groups", node.Len())
	return node, nil
}

// joinCluster asks a member to add this node, following MOVED to the
// leader and retrying while the group elects one. Joining is idempotent.
func raftDir(o options) string { return filepath.Join(o.dir, "raft") }

// clusterGroups is the number of Raft groups this node runs: the count its
// directory holds from an earlier start, else --cluster-groups on a node
// that bootstraps, else, for a node that joins, the count the member it
// joins through reports (CLUSTER INFO's cluster_raft_groups).
func clusterGroups(o options, log *slog.Logger) (int, error) {
	stored, err := replication.StoredGroups(raftDir(o))
	switch {
	case err != nil:
		return 0, err
	case stored != 0:
		if o.clusterGroups != 0 && o.clusterGroups != stored {
			return 0, fmt.Errorf("--cluster-groups %d, but %s holds %d groups: the count is fixed when the cluster is bootstrapped", o.clusterGroups, raftDir(o), stored)
		}
		return stored, nil
	case o.clusterGroups < 0:
		return 0, fmt.Errorf("--cluster-groups %d: want at least 1", o.clusterGroups)
	case o.clusterJoin == "":
		return max(1, o.clusterGroups), nil
	}
	// A joining node runs the cluster's groups, whatever it was told: a
	// count of its own that differs is refused, not followed.
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := askMember(o, o.clusterJoin, "CLUSTER", "INFO")
		if err == nil {
			n := 1 // a member that predates groups runs one
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_raft_groups:"); ok {
					if n, err = strconv.Atoi(v); err != nil {
						return 0, fmt.Errorf("%s answers cluster_raft_groups:%s", o.clusterJoin, v)
					}
				}
			}
			if o.clusterGroups != 0 && o.clusterGroups != n {
				return 0, fmt.Errorf("--cluster-groups %d, but the cluster %s belongs to runs %d groups: the count is fixed when the cluster is bootstrapped (leave --cluster-groups out when joining)", o.clusterGroups, o.clusterJoin, n)
			}
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("asking %s for the cluster's group count: %w", o.clusterJoin, err)
		}
		log.Info("waiting for the cluster to tell its group count", "via", o.clusterJoin, "err", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// askMember sends one command to another member's client port, as
// --cluster-join does (masteruser/masterauth, tls-replication).
func askMember(o options, addr string, args ...any) (string, error) {
	tlsCfg, err := joinTLS(o)
	if err != nil {
		return "", err
	}
	pass := o.masterAuth
	if pass == "" {
		pass = o.requirePass
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: o.masterUser, Password: pass, Protocol: 2, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, TLSConfig: tlsCfg})
	defer rdb.Close()
	return rdb.Do(context.Background(), args...).Text()
}

func joinCluster(o options, node *replication.Groups, log *slog.Logger) error {
	addr := o.clusterJoin
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := askMember(o, addr, "CLUSTER", "JOIN", node.ID(), node.RaftAddr(), node.ClientAddr())
		if err == nil {
			log.Info("joined the cluster", "via", addr)
			return nil
		}
		msg := err.Error()
		if f := strings.Fields(msg); len(f) == 3 && f[0] == "MOVED" {
			addr = f[2]
			continue
		}
		if time.Now().After(deadline) {
			return err
		}
		log.Info("waiting to join the cluster", "via", addr, "reply", msg)
		time.Sleep(500 * time.Millisecond)
	}
}
