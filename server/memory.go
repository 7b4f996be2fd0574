package server

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// MEMORY: what a key costs, and the server's memory, in Sluice's terms. A
// key's cost is exact (its record and index slot in its shard's table:
// nothing is sampled, so SAMPLES is accepted and has nothing to change);
// the allocator is Go's.
func memoryCommands() []*command {
	return []*command{
		{name: "memory", arity: -2, group: "server", since: "4.0.0",
			summary: "MEMORY USAGE key [SAMPLES count]|STATS|DOCTOR|MALLOC-STATS|PURGE|HELP.", args: []argSpec{str("subcommand"), opt(key("key"))},
			subs: []*command{
				keySub("usage", -3, flagReadonly, 0), sub("stats", 2, 0, 0), sub("doctor", 2, 0, 0),
				sub("malloc-stats", 2, 0, 0), sub("purge", 2, 0, 0), sub("help", 2, flagLoading|flagStale, 0),
			},
			run: cmdMemory},
	}
}

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return memory problems reports.",
	"MALLOC-STATS",
	"    Return internal statistics report from the memory allocator.",
	"PURGE",
	"    Attempt to purge dirty pages for reclamation by the allocator.",
	"STATS",
	"    Return information about the memory usage of the server.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Prints this help.",
}

func cmdMemory(s *Server, c *client, args [][]byte) {
	switch strings.ToLower(string(args[1])) {
	case "usage":
		// Options are checked as Redis checks them, before the key.
		for i := 3; i < len(args); i += 2 {
			if !isWord(args[i], "samples") || i+1 >= len(args) {
				c.writeError(errSyntax)
				return
			}
			n, err := engine.ParseInt64(args[i+1])
			if err != nil {
				c.writeError(engine.ErrNotInteger)
				return
			}
			if n < 0 {
				c.writeError(errSyntax)
				return
			}
		}
		r := c.execEngine(engine.Command{Op: engine.OpObject, Key: args[2], N: [4]int64{engine.ObjectMemoryUsage}})[0]
		c.writeReply(&r)
	case "stats":
		memoryStats(s, c)
	case "doctor":
		c.writeVerbatim(memoryDoctor(s))
	case "malloc-stats":
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		c.writeVerbatim(fmt.Sprintf("Go runtime allocator: heap_alloc=%d heap_sys=%d heap_idle=%d heap_released=%d heap_objects=%d stack_sys=%d sys=%d gc_cycles=%d\n",
			ms.HeapAlloc, ms.HeapSys, ms.HeapIdle, ms.HeapReleased, ms.HeapObjects, ms.StackSys, ms.Sys, ms.NumGC))
	case "purge":
		// Returns freed heap pages to the operating system now, rather
		// than when the runtime's scavenger gets to them.
		debug.FreeOSMemory()
		c.writeOK()
	case "help":
		c.writeArray(len(memoryHelp))
		for _, line := range memoryHelp {
			c.writeStatus(line)
		}
	}
}

// memoryStats: MEMORY STATS, a map as Redis's, of the fields that have a
// meaning here: the tables (dataset), the Go heap and what the process
// took from the system.
func memoryStats(s *Server, c *client) {
	st := s.backend.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	perKey, pct := int64(0), 0.0
	if st.Keys > 0 {
		perKey = st.Memory / st.Keys
	}
	if ms.Sys > 0 {
		pct = 100 * float64(st.Memory) / float64(ms.Sys)
	}
	c.writeMap(7)
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"total.allocated", int64(ms.HeapAlloc)},
		{"total.system", int64(ms.Sys)},
		{"maxmemory", s.backend.MaxMemory()},
		{"keys.count", st.Keys},
		{"keys.bytes-per-key", perKey},
		{"dataset.bytes", st.Memory},
	} {
		c.writeBulkString(f.name)
		c.writeInt(f.n)
	}
	c.writeBulkString("dataset.percentage")
	c.writeDouble(pct)
}

// memoryDoctor is MEMORY DOCTOR's report: how full the tables are against
// maxmemory, the one memory limit Sluice enforces.
func memoryDoctor(s *Server) string {
	st := s.backend.Stats()
	limit := s.backend.MaxMemory()
	report := "Dataset: " + humanBytes(st.Memory) + " in " + strconv.FormatInt(st.Keys, 10) + " keys.\n"
	switch {
	case limit == 0:
		report += "No maxmemory is set: the tables grow until the machine runs out. Set maxmemory to have writes that create state refused (OOM) instead.\n"
	case st.Memory >= limit:
		report += "Over maxmemory (" + humanBytes(limit) + "): commands that create state are refused with OOM until keys expire or are deleted.\n"
	case st.Memory >= limit/10*9:
		report += "Above 90% of maxmemory (" + humanBytes(limit) + "): writes that create state will soon be refused with OOM.\n"
	default:
		report += "Below 90% of maxmemory (" + humanBytes(limit) + "): no memory problems found.\n"
	}
	return report
}
