package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/sluice/engine"
)

// metrics exposes the server's counters to Prometheus. It reads them when
// scraped, from the same atomics INFO reads, so the decision path pays
// nothing for it.
type metrics struct {
	s *Server

	decisions   *prometheus.Desc
	commands    *prometheus.Desc
	connections *prometheus.Desc
	clients     *prometheus.Desc
	keys        *prometheus.Desc
	swept       *prometheus.Desc
	memory      *prometheus.Desc
	maxMemory   *prometheus.Desc
	leader      *prometheus.Desc
	leases      *prometheus.Desc
	retries     *prometheus.Desc
	authFails   *prometheus.Desc

	// The hot keys, top defaultHotKeysCount of each ranking: at most 20
	// series, labelled by rank ("1".."10") and key.
	hotDecisions, hotRefusals *prometheus.Desc
	cmds                      *cmdMetrics // per command, errors, slowlog (cmdstats.go)
}

func newMetrics(s *Server) *metrics {
	return &metrics{
		s:           s,
		decisions:   prometheus.NewDesc("sluice_decisions_total", "Rate-limit decisions with a cost, by outcome (peeks, cost 0, are reads and not counted).", []string{"outcome"}, nil),
		commands:    prometheus.NewDesc("sluice_commands_processed_total", "Commands processed.", nil, nil),
		connections: prometheus.NewDesc("sluice_connections_received_total", "Connections accepted.", nil, nil),
		clients:     prometheus.NewDesc("sluice_connected_clients", "Open client connections.", nil, nil),
		keys:        prometheus.NewDesc("sluice_keys", "Stored keys, counting expired ones not yet swept.", nil, nil),
		swept:       prometheus.NewDesc("sluice_keys_swept_total", "Expired keys freed by the sweeper.", nil, nil),
		memory:      prometheus.NewDesc("sluice_used_memory_bytes", "Bytes held by the shard tables (what maxmemory limits).", nil, nil),
		maxMemory:   prometheus.NewDesc("sluice_maxmemory_bytes", "The memory limit; 0 for none.", nil, nil),
		leader:      prometheus.NewDesc("sluice_cluster_leader", "1 on the cluster leader, 0 on a follower (cluster mode only).", nil, nil),
		leases:      prometheus.NewDesc("sluice_leases_total", "CONC.ACQUIREs, by outcome (acquired: a new lease or a held id's renewal; refused: the key full).", []string{"outcome"}, nil),
		retries:     prometheus.NewDesc("sluice_reqid_retries_answered_total", "Decisions answered from a REQID receipt: retries charged nothing.", nil, nil),
		authFails:   prometheus.NewDesc("sluice_auth_failures_total", "Failed AUTH and HELLO AUTH attempts (INFO acl_access_denied_auth).", nil, nil),

		hotDecisions: prometheus.NewDesc("sluice_hot_key_decisions_per_second", "Estimated decisions per second of the 10 hottest keys (LIMIT.HOTKEYS BY decisions), by rank.", []string{"rank", "key"}, nil),
		hotRefusals:  prometheus.NewDesc("sluice_hot_key_refusals_per_second", "Estimated refusals per second of the 10 most refused keys (LIMIT.HOTKEYS BY refusals), by rank.", []string{"rank", "key"}, nil),
		cmds:         newCmdMetrics(),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.decisions, m.commands, m.connections, m.clients, m.keys, m.swept, m.memory, m.maxMemory, m.leader, m.leases, m.retries, m.authFails, m.hotDecisions, m.hotRefusals} {
		ch <- d
	}
	m.cmds.describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.s.backend.Stats()
	ch <- prometheus.MustNewConstMetric(m.decisions, prometheus.CounterValue, float64(st.Allowed), "allowed")
	ch <- prometheus.MustNewConstMetric(m.decisions, prometheus.CounterValue, float64(st.Limited), "limited")
	ch <- prometheus.MustNewConstMetric(m.commands, prometheus.CounterValue, float64(m.s.commandsN.Load()))
	ch <- prometheus.MustNewConstMetric(m.connections, prometheus.CounterValue, float64(m.s.connections.Load()))
	ch <- prometheus.MustNewConstMetric(m.clients, prometheus.GaugeValue, float64(m.s.ConnectedClients()))
	ch <- prometheus.MustNewConstMetric(m.keys, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(m.swept, prometheus.CounterValue, float64(st.Swept))
	ch <- prometheus.MustNewConstMetric(m.memory, prometheus.GaugeValue, float64(st.Memory))
	ch <- prometheus.MustNewConstMetric(m.maxMemory, prometheus.GaugeValue, float64(m.s.backend.MaxMemory()))
	ch <- prometheus.MustNewConstMetric(m.leases, prometheus.CounterValue, float64(st.LeasesAcquired), "acquired")
	ch <- prometheus.MustNewConstMetric(m.leases, prometheus.CounterValue, float64(st.LeasesRefused), "refused")
	ch <- prometheus.MustNewConstMetric(m.retries, prometheus.CounterValue, float64(st.ReceiptHits))
	ch <- prometheus.MustNewConstMetric(m.authFails, prometheus.CounterValue, float64(m.s.authDenied.Load()))
	if h, ok := m.s.hotKeys(); ok && h.HotKeysTracking() {
		now := m.s.clock.Now()
		for by, desc := range map[engine.HotKeyBy]*prometheus.Desc{engine.HotByDecisions: m.hotDecisions, engine.HotByRefusals: m.hotRefusals} {
			for i, k := range h.HotKeys(by, defaultHotKeysCount, now) {
				// A label must be UTF-8; a key need not be.
				key := strings.ToValidUTF8(string(k.Key), "\uFFFD")
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, k.Rate, strconv.Itoa(i+1), key)
			}
		}
	}
	m.cmds.collect(m.s.stats, ch)
	if cl, ok := m.s.clustered(); ok {
		leader := 0.0
		if cl.ClusterView().Self.Leader {
			leader = 1
		}
		ch <- prometheus.MustNewConstMetric(m.leader, prometheus.GaugeValue, leader)
	}
}

// MetricsHandler serves the server's metrics, plus Go runtime and process
// metrics, in the Prometheus text format. Each call builds its own
// registry, so two servers in one process do not collide.
func (s *Server) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetrics(s), newHealthMetrics(s.health), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
