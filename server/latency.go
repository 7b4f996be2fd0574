package server

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LATENCY: the latency monitor (events as slow as
// latency-monitor-threshold ms, per second) and the per-command histograms.
// Sluice records Redis's "command" and "fast-command" events; the others
// (aof-fsync-always, expire-cycle, fork...) belong to machinery Sluice does
// not have, or runs off the connection's path.

const latencySamples = 160 // Redis's history per event

type latencySample struct {
	unix int64
	ms   int64
}

type latencySeries struct {
	samples [latencySamples]latencySample
	idx     int
	max     int64
}

type latencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencySeries
}

// commandSample records a command's ms as Redis does: the event is
// fast-command for commands flagged fast, command otherwise.
func (m *latencyMonitor) commandSample(row *command, ms int64) {
	event := "command"
	if row.flags&flagFast != 0 {
		event = "fast-command"
	}
	m.add(event, ms, time.Now().Unix())
}

// add keeps one sample per second per event, the highest.
func (m *latencyMonitor) add(event string, ms, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencySeries{}
	}
	ts := m.events[event]
	if ts == nil {
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, ms)
	prev := &ts.samples[(ts.idx+latencySamples-1)%latencySamples]
	if prev.unix == now {
		prev.ms = max(prev.ms, ms)
		return
	}
	ts.samples[ts.idx] = latencySample{unix: now, ms: ms}
	ts.idx = (ts.idx + 1) % latencySamples
}

var latencyHelp = []string{
	"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return a human readable latency analysis report.",
	"GRAPH <event>",
	"    Return an ASCII latency graph for the <event> class.",
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HISTOGRAM [COMMAND ...]",
	"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
	"    If no commands are specified then all histograms are replied.",
	"HELP",
	"    Prints this help.",
}

// cmdLatency: LATENCY LATEST | HISTORY event | RESET [event...] |
// HISTOGRAM [command...] | GRAPH event | DOCTOR | HELP.
func cmdLatency(s *Server, c *client, args [][]byte) {
	m := &s.stats.latency
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "latest" && len(args) == 2:
		m.mu.Lock()
		names := m.names()
		c.writeArray(len(names))
		for _, name := range names {
			ts := m.events[name]
			last := ts.samples[(ts.idx+latencySamples-1)%latencySamples]
			c.writeArray(4)
			c.writeBulkString(name)
			c.writeInt(last.unix)
			c.writeInt(last.ms)
			c.writeInt(ts.max)
		}
		m.mu.Unlock()
	case sub == "history" && len(args) == 3:
		m.mu.Lock()
		ts := m.events[string(args[2])]
		var samples []latencySample
		if ts != nil {
			for j := range latencySamples {
				if sm := ts.samples[(ts.idx+j)%latencySamples]; sm.unix != 0 {
					samples = append(samples, sm)
				}
			}
		}
		m.mu.Unlock()
		c.writeArray(len(samples))
		for _, sm := range samples {
			c.writeArray(2)
			c.writeInt(sm.unix)
			c.writeInt(sm.ms)
		}
	case sub == "reset":
		m.mu.Lock()
		n := 0
		if len(args) == 2 {
			n = len(m.events)
			m.events = nil
		} else {
			for _, e := range args[2:] {
				if _, ok := m.events[string(e)]; ok {
					delete(m.events, string(e))
					n++
				}
			}
		}
		m.mu.Unlock()
		c.writeInt(int64(n))
	case sub == "graph" && len(args) == 3:
		m.mu.Lock()
		ts := m.events[string(args[2])]
		var text string
		if ts != nil {
			lo, hi := int64(-1), int64(0)
			for _, sm := range ts.samples {
				if sm.unix != 0 {
					hi = max(hi, sm.ms)
					if lo < 0 || sm.ms < lo {
						lo = sm.ms
					}
				}
			}
			// Redis draws a sparkline under this header; Sluice gives
			// the header and the samples as LATENCY HISTORY has them.
			text = fmt.Sprintf("%s - high %d ms, low %d ms (all time high %d ms)\n%s\n", args[2], hi, max(lo, 0), ts.max, strings.Repeat("-", 80))
		}
		m.mu.Unlock()
		if ts == nil {
			c.writeError(fmt.Errorf("No samples available for event '%s'", args[2]))
			return
		}
		c.writeVerbatim(text)
	case sub == "doctor" && len(args) == 2:
		c.writeVerbatim(m.doctor(s.stats.latThresh.Load()))
	case sub == "histogram":
		c.writeHistograms(s.stats, args[2:])
	case sub == "help" && len(args) == 2:
		c.writeArray(len(latencyHelp))
		for _, h := range latencyHelp {
			c.writeStatus(h)
		}
	default:
		c.writeError(subcommandSyntax(args))
	}
}

// names are the events, in name order. Under m.mu.
func (m *latencyMonitor) names() []string {
	names := make([]string, 0, len(m.events))
	for k := range m.events {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// doctor is a short plain report: Redis's advice is about its own
// machinery (fork, AOF, transparent huge pages), which Sluice has not.
func (m *latencyMonitor) doctor(threshold int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if threshold == 0 {
		return "The latency monitor is off: CONFIG SET latency-monitor-threshold <milliseconds> turns it on.\n"
	}
	if len(m.events) == 0 {
		return "No latency spikes over " + strconv.FormatInt(threshold, 10) + " ms were observed.\n"
	}
	var b strings.Builder
	for _, name := range m.names() {
		ts := m.events[name]
		n := 0
		for _, sm := range ts.samples {
			if sm.unix != 0 {
				n++
			}
		}
		fmt.Fprintf(&b, "%s: %d latency spikes (seconds over %d ms), worst %d ms.\n", name, n, threshold, ts.max)
	}
	b.WriteString("SLOWLOG GET names the slow commands.\n")
	return b.String()
}

// writeHistograms is LATENCY HISTOGRAM: per command with data, its calls
// and the cumulative count at each power of two of microseconds.
func (c *client) writeHistograms(st *cmdStats, names [][]byte) {
	var rows []*command
	if len(names) == 0 {
		rows = aclCommands
	} else {
		for _, n := range names {
			row := lookupACLCommand(strings.ToLower(string(n)))
			if row == nil {
				continue
			}
			rows = append(rows, row)
			if row.parent == nil {
				rows = append(rows, row.subs...)
			}
		}
	}
	type hist struct {
		name   string
		counts []int64
		total  int64
	}
	var out []hist
	for _, row := range rows {
		if h := st.cmds[row.id].hist.Load(); h != nil {
			counts, total := h.snapshot()
			out = append(out, hist{row.fullname, counts, total})
		}
	}
	c.writeMap(len(out))
	for _, h := range out {
		c.writeBulkString(h.name)
		c.writeMap(2)
		c.writeBulkString("calls")
		c.writeInt(h.total)
		c.writeBulkString("histogram_usec")
		var keys, cums []int64
		var cum int64
		for e := 0; ; e++ {
			// Buckets below 2^e µs: those before index (e+10-3)*histSub.
			end := min((e+7)*histSub, histBuckets)
			prev := cum
			cum = 0
			for _, n := range h.counts[:end] {
				cum += n
			}
			if cum > prev {
				keys, cums = append(keys, int64(1)<<e), append(cums, cum)
			}
			if end == histBuckets || cum == h.total {
				break
			}
		}
		c.writeMap(len(keys))
		for i := range keys {
			c.writeInt(keys[i])
			c.writeInt(cums[i])
		}
	}
}
