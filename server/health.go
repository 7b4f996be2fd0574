package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health answers the probes on the metrics listener: GET /healthz
// (liveness: the process answers; nothing else is consulted, so it
// answers while a big snapshot loads) and GET /readyz (readiness: the
// state is loaded and, in cluster mode, this node follows a live leader
// closely enough to serve). The process creates it before it loads its
// state, so both answer from the first moment; New marks it loaded.
// Safe for concurrent use.
type Health struct {
	cfg      HealthConfig
	srv      atomic.Pointer[Server] // set by New: the state is loaded
	stopping atomic.Bool            // set by Close: draining
}

// HealthConfig bounds readiness in cluster mode. The zero value is
// usable.
type HealthConfig struct {
	// MaxApplyLag: a node whose applied index is more than this many
	// entries behind its commit index is not ready. Default
	// DefaultReadyMaxApplyLag.
	MaxApplyLag uint64
	// MaxLastContact: a follower that has not heard from a leader for
	// longer is not ready. Default DefaultReadyMaxLastContact. (Raft
	// itself drops a silent leader after its heartbeat timeout, which the
	// leader check catches sooner; this bound holds whatever the timeouts.)
	MaxLastContact time.Duration
}

// The readiness bounds' defaults.
const (
	DefaultReadyMaxApplyLag    = 1000
	DefaultReadyMaxLastContact = 5 * time.Second
)

// RaftHealth is implemented by a cluster backend (replication.Node): the
// facts readiness and the sluice_raft_* metrics read. Each must answer
// without waiting on Raft's goroutines, so a probe answers while Raft is
// busy.
type RaftHealth interface {
	IsLeader() bool
	// HasLeader: a leader is known (this node included).
	HasLeader() bool
	CommitIndex() uint64
	AppliedIndex() uint64
	// LastLeaderContact is how long ago a follower last heard from a
	// leader; 0 on the leader.
	LastLeaderContact() time.Duration
	// LeaderChanges counts the leaders this node has seen take office.
	LeaderChanges() uint64
}

// fsyncHistogram is implemented by standalone persistence
// (persistence.Durable): its journal's fsync durations, bucketed.
type fsyncHistogram interface {
	FsyncHistogram() (bounds []float64, cumulative []uint64, count uint64, sumSeconds float64)
}

// NewHealth returns the probes of a process still loading its state:
// /healthz answers 200 and /readyz 503 "loading" until a Server is made
// with it (Config.Health).
func NewHealth(cfg HealthConfig) *Health {
	if cfg.MaxApplyLag == 0 {
		cfg.MaxApplyLag = DefaultReadyMaxApplyLag
	}
	if cfg.MaxLastContact <= 0 {
		cfg.MaxLastContact = DefaultReadyMaxLastContact
	}
	return &Health{cfg: cfg}
}

// attach records that s serves the loaded state.
func (h *Health) attach(s *Server) { h.srv.Store(s) }

// Handler serves GET /healthz, GET /readyz (?verbose lists every check)
// and GET /metrics (while loading, only sluice_ready and the Go and
// process metrics).
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", h.serveReadyz)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newHealthMetrics(h), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	loading := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var loaded sync.Once
	var metrics http.Handler
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		s := h.srv.Load()
		if s == nil {
			loading.ServeHTTP(w, r)
			return
		}
		loaded.Do(func() { metrics = s.MetricsHandler() })
		metrics.ServeHTTP(w, r)
	})
	return mux
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}

// serveReadyz answers 200 "ok" or 503 naming the failed checks; with
// ?verbose, every check, as Kubernetes' apiserver lists its own.
func (h *Health) serveReadyz(w http.ResponseWriter, r *http.Request) {
	checks := h.checks()
	verbose := r.URL.Query().Has("verbose")
	var b strings.Builder
	ready := true
	for _, c := range checks {
		if c.failure != "" {
			ready = false
			fmt.Fprintf(&b, "[-]%s failed: %s\n", c.name, c.failure)
		} else if verbose {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	switch {
	case !ready:
		b.WriteString("readyz check failed\n")
		plain(w, http.StatusServiceUnavailable, b.String())
	case verbose:
		b.WriteString("readyz check passed\n")
		plain(w, http.StatusOK, b.String())
	default:
		plain(w, http.StatusOK, "ok\n")
	}
}

// check is one readiness condition; failure is empty when it holds.
type check struct {
	name    string
	failure string
}

// checks evaluates readiness, in the order a starting node passes them.
func (h *Health) checks() []check {
	s := h.srv.Load()
	if s == nil {
		return []check{{"loaded", "loading the dataset from disk"}}
	}
	out := []check{{name: "loaded"}, {name: "shutdown"}}
	if h.stopping.Load() {
		out[1].failure = "shutting down"
	}
	rh, ok := s.backend.(RaftHealth)
	if !ok {
		return out
	}
	leader := check{name: "leader"}
	if !rh.HasLeader() {
		leader.failure = "no leader known"
	}
	contact := check{name: "leader-contact"}
	if last := rh.LastLeaderContact(); !rh.IsLeader() && last > h.cfg.MaxLastContact {
		contact.failure = fmt.Sprintf("last heard from a leader %v ago (bound %v)", last.Round(time.Millisecond), h.cfg.MaxLastContact)
	}
	apply := check{name: "apply-lag"}
	// Read applied first: it only grows, so lag is never negative.
	applied := rh.AppliedIndex()
	if commit := rh.CommitIndex(); commit > applied && commit-applied > h.cfg.MaxApplyLag {
		apply.failure = fmt.Sprintf("applied index %d is %d entries behind commit index %d (bound %d)", applied, commit-applied, commit, h.cfg.MaxApplyLag)
	}
	return append(out, leader, contact, apply)
}

// Ready reports whether the node can serve traffic, and if not why (the
// first failed check); "ok" when it can.
func (h *Health) Ready() (bool, string) {
	for _, c := range h.checks() {
		if c.failure != "" {
			return false, c.name + ": " + c.failure
		}
	}
	return true, "ok"
}

// infoLines is INFO health.
func (h *Health) infoLines() []string {
	ready, reason := h.Ready()
	return []string{"ready:" + boolDigit(ready), "ready_reason:" + reason}
}

// loadingLine is INFO persistence's loading field, as Redis's. A server
// answers only once its state is loaded (connections made during the
// load wait in the listen queue), so it reads 0 whenever INFO can be
// asked; /readyz answers during the load.
func (h *Health) loadingLine() string { return "loading:" + boolDigit(h.srv.Load() == nil) }

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// healthMetrics exposes readiness, the Raft progress and the journal's
// fsync times, read at scrape time.
type healthMetrics struct {
	h *Health

	ready         *prometheus.Desc
	commitIndex   *prometheus.Desc
	appliedIndex  *prometheus.Desc
	leaderChanges *prometheus.Desc
	lastContact   *prometheus.Desc
	fsync         *prometheus.Desc
}

func newHealthMetrics(h *Health) *healthMetrics {
	return &healthMetrics{
		h:             h,
		ready:         prometheus.NewDesc("sluice_ready", "1 when /readyz answers 200: the state is loaded and, in cluster mode, a leader is known, heard from recently and applied closely.", nil, nil),
		commitIndex:   prometheus.NewDesc("sluice_raft_commit_index", "The highest Raft index this node knows to be committed (cluster mode).", nil, nil),
		appliedIndex:  prometheus.NewDesc("sluice_raft_applied_index", "The last Raft index this node's state has applied (cluster mode).", nil, nil),
		leaderChanges: prometheus.NewDesc("sluice_raft_leader_changes_total", "Leaders this node has seen take office since it started (cluster mode).", nil, nil),
		lastContact:   prometheus.NewDesc("sluice_raft_last_contact_seconds", "Seconds since this follower last heard from a leader (cluster mode, followers only).", nil, nil),
		fsync:         prometheus.NewDesc("sluice_fsync_duration_seconds", "Duration of the append-only file's fsync calls (standalone persistence).", nil, nil),
	}
}

func (m *healthMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.ready, m.commitIndex, m.appliedIndex, m.leaderChanges, m.lastContact, m.fsync} {
		ch <- d
	}
}

func (m *healthMetrics) Collect(ch chan<- prometheus.Metric) {
	ready := 0.0
	if ok, _ := m.h.Ready(); ok {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(m.ready, prometheus.GaugeValue, ready)
	s := m.h.srv.Load()
	if s == nil {
		return
	}
	if rh, ok := s.backend.(RaftHealth); ok {
		ch <- prometheus.MustNewConstMetric(m.commitIndex, prometheus.GaugeValue, float64(rh.CommitIndex()))
		ch <- prometheus.MustNewConstMetric(m.appliedIndex, prometheus.GaugeValue, float64(rh.AppliedIndex()))
		ch <- prometheus.MustNewConstMetric(m.leaderChanges, prometheus.CounterValue, float64(rh.LeaderChanges()))
		if !rh.IsLeader() {
			ch <- prometheus.MustNewConstMetric(m.lastContact, prometheus.GaugeValue, rh.LastLeaderContact().Seconds())
		}
	}
	if fh, ok := s.cfg.Persistence.(fsyncHistogram); ok {
		bounds, cum, count, sum := fh.FsyncHistogram()
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b] = cum[i]
		}
		ch <- prometheus.MustNewConstHistogram(m.fsync, count, sum, buckets)
	}
}
