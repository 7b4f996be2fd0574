package bench

import (
	"crypto/tls"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The Redis peers of Sluice's decision commands. Each is loaded once per run
// with SCRIPT LOAD and called with EVALSHA.
var (
	//go:embed scripts/gcra.lua
	gcraScript string
	//go:embed scripts/sw.lua
	swScript string
	//go:embed scripts/fw.lua
	fwScript string
)

// Kind says which command set a target speaks; it decides which mode of a
// family runs against it.
type Kind int

const (
	// KindAny runs every mode exactly as named (a -h/-p target).
	KindAny Kind = iota
	// KindSluice maps each family to its Sluice command (CL.THROTTLE, ...).
	KindSluice
	// KindRedis maps each family to its Redis peer (plain command or Lua).
	KindRedis
)

func (k Kind) String() string {
	switch k {
	case KindSluice:
		return "sluice"
	case KindRedis:
		return "redis"
	}
	return "any"
}

// Limit holds the limiter parameters that decision modes send. The zero
// value means the defaults below.
type Limit struct {
	// Count is the limit: units per Period (SW/SL/FW limit, CL.THROTTLE
	// count). Default 100.
	Count int64
	// Period is the window or GCRA period in seconds; decimals allowed.
	// Default 1.
	Period float64
	// Burst is CL.THROTTLE's max_burst (the bucket holds Burst+1). Default
	// Count-1, so both algorithms admit about Count per Period.
	Burst int64
	// Cost is the units each request asks for. Default 1.
	Cost int64
}

func (l Limit) withDefaults() Limit {
	if l.Count == 0 {
		l.Count = 100
	}
	if l.Period == 0 {
		l.Period = 1
	}
	if l.Burst == 0 {
		l.Burst = l.Count - 1
	}
	if l.Cost == 0 {
		l.Cost = 1
	}
	return l
}

func (l Limit) validate() error {
	switch {
	case l.Count < 1:
		return fmt.Errorf("limit count %d: must be at least 1", l.Count)
	case !(l.Period > 0):
		return fmt.Errorf("limit period %v: must be positive", l.Period)
	case l.Burst < 0:
		return fmt.Errorf("burst %d: must not be negative", l.Burst)
	case l.Cost < 0:
		return fmt.Errorf("cost %d: must not be negative", l.Cost)
	}
	return nil
}

// mode is one workload as sent to one kind of server.
type mode struct {
	name     string
	family   string
	native   Kind   // KindAny: the same command on both servers
	command  string // command name, or the script's name for Lua modes
	script   string // Lua source; set for EVALSHA modes
	keyed    bool
	decision bool // replies are the 5-field array; first element 1 = limited
	// args returns the constant arguments after the key.
	args func(Limit) []string
	// build, when set, encodes the whole request instead (commands that
	// name the key more than once).
	build func(Limit) request
	// pattern, when set, makes each request an operation of several
	// commands (patterns.go).
	pattern func(Config) *pattern
	// lib, when set, makes each request a limiter library's script call,
	// sent as that library sends it (libscripts.go).
	lib *libScript
}

func gcraArgs(l Limit) []string {
	return []string{itoa(l.Burst), itoa(l.Count), ftoa(l.Period), itoa(l.Cost)}
}

func windowArgs(l Limit) []string {
	return []string{itoa(l.Count), ftoa(l.Period), itoa(l.Cost)}
}

// lbArgs: LB.RESERVE key rate period burst cost, Count per Period with
// bursts of Burst+1 (as CL.THROTTLE's bucket holds).
func lbArgs(l Limit) []string {
	return []string{itoa(l.Count), ftoa(l.Period), itoa(l.Burst + 1), itoa(l.Cost)}
}

func noArgs(Limit) []string { return nil }

func itoa(n int64) string   { return strconv.FormatInt(n, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// modes is the read-only table of every workload.
var modes = []mode{
	{name: "ping", family: "ping", native: KindAny, command: "PING", args: noArgs},
	{name: "incr", family: "incr", native: KindAny, command: "INCR", keyed: true, args: noArgs},
	{name: "cl.throttle", family: "gcra", native: KindSluice, command: "CL.THROTTLE", keyed: true, decision: true, args: gcraArgs},
	{name: "lua-gcra", family: "gcra", native: KindRedis, command: "gcra.lua", script: gcraScript, keyed: true, decision: true, args: gcraArgs},
	{name: "sw.check", family: "sliding-window", native: KindSluice, command: "SW.CHECK", keyed: true, decision: true, args: windowArgs},
	{name: "lua-sw", family: "sliding-window", native: KindRedis, command: "sw.lua", script: swScript, keyed: true, decision: true, args: windowArgs},
	{name: "fw.check", family: "fixed-window", native: KindSluice, command: "FW.CHECK", keyed: true, decision: true, args: windowArgs},
	{name: "lua-fw", family: "fixed-window", native: KindRedis, command: "fw.lua", script: fwScript, keyed: true, decision: true, args: windowArgs},
	{name: "sl.check", family: "sliding-log", native: KindSluice, command: "SL.CHECK", keyed: true, decision: true, args: windowArgs},
	// Shaping: every reservation is admitted, with a wait (no MAXWAIT).
	{name: "lb.reserve", family: "leaky-bucket", native: KindSluice, command: "LB.RESERVE", keyed: true, args: lbArgs},
	{name: "conc", family: "concurrency", native: KindSluice, command: "CONC.ACQUIRE+CONC.RELEASE", keyed: true, args: noArgs, pattern: concPattern},
	{name: "limit.all", family: "limit-all", native: KindSluice, command: "LIMIT.ALL", keyed: true, decision: true, args: noArgs, build: newLimitAllRequest},
	// Data-type recipes, the same commands on both servers.
	{name: "hash-bucket", family: "hash-bucket", native: KindAny, command: "HMGET+HSET", keyed: true, args: noArgs, pattern: hashBucketPattern},
	{name: "zset-log", family: "zset-log", native: KindAny, command: "MULTI ZREMRANGEBYSCORE ZCARD ZADD EXPIRE EXEC", keyed: true, args: noArgs, pattern: zsetLogPattern},
	{name: "list-recent", family: "list-recent", native: KindAny, command: "LPUSH+LTRIM+LINDEX", keyed: true, args: noArgs, pattern: listRecentPattern},
	// Limiter libraries' own scripts, the same bytes on both servers.
	{name: "redis-rate", family: "redis-rate", native: KindAny, command: "redis_rate allowN", keyed: true, decision: true, args: noArgs, lib: redisRateLib},
	{name: "redis-rate-atmost", family: "redis-rate-atmost", native: KindAny, command: "redis_rate allowAtMost", keyed: true, decision: true, args: noArgs, lib: redisRateAtMostLib},
	{name: "rlflex", family: "rlflex", native: KindAny, command: "rate-limiter-flexible incrTtl", keyed: true, decision: true, args: noArgs, lib: rlflexLib},
	{name: "rate-limit-redis", family: "rate-limit-redis", native: KindAny, command: "rate-limit-redis increment", keyed: true, decision: true, args: noArgs, lib: rateLimitRedisLib},
	{name: "ulule", family: "ulule", native: KindAny, command: "ulule/limiter incr", keyed: true, decision: true, args: noArgs, lib: ululeLib},
	{name: "fastify", family: "fastify", native: KindAny, command: "@fastify/rate-limit incr", keyed: true, decision: true, args: noArgs, lib: fastifyLib},
	{name: "limits-fixed", family: "limits-fixed", native: KindAny, command: "limits incr_expire", keyed: true, decision: true, args: noArgs, lib: limitsFixedLib},
	{name: "limits-moving", family: "limits-moving", native: KindAny, command: "limits acquire_moving_window", keyed: true, decision: true, args: noArgs, lib: limitsMovingLib},
}

// ModeNames lists every mode name, in table order.
func ModeNames() []string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.name
	}
	return names
}

// lookupMode finds a mode by name (case-insensitive).
func lookupMode(name string) (*mode, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	for i := range modes {
		if modes[i].name == name {
			return &modes[i], nil
		}
	}
	return nil, fmt.Errorf("unknown mode %q (known: %s)", name, strings.Join(ModeNames(), ", "))
}

// forKind returns the mode of m's family that a target of kind k runs, or
// nil when the family has no command on that kind of server.
func (m *mode) forKind(k Kind) *mode {
	if k == KindAny || m.native == KindAny || m.native == k {
		return m
	}
	for i := range modes {
		if modes[i].family == m.family && (modes[i].native == k || modes[i].native == KindAny) {
			return &modes[i]
		}
	}
	return nil
}

// request pre-encodes m for lim; sha is the loaded script's SHA1 for Lua
// modes.
func (m *mode) request(lim Limit, sha string) request {
	if m.build != nil {
		return m.build(lim)
	}
	if m.lib != nil {
		// What the measured path sends most: EVALSHA. Each connection's
		// libConn encodes the calls themselves.
		return newRequest([]string{m.lib.evalsha, m.lib.sha, "1"}, true, nil)
	}
	if m.script != "" {
		return newRequest([]string{"EVALSHA", sha, "1"}, true, m.args(lim))
	}
	return newRequest([]string{m.command}, m.keyed, m.args(lim))
}

// Target is a server to measure: just an address, a display name and the
// kind of commands it speaks.
type Target struct {
	Name string // shown in reports; default Kind's name, or Addr for KindAny
	Addr string // host:port; must be loopback unless Config.AllowRemote
	Kind Kind
	// Pid, when positive, is the server's process id (a server this
	// program started, see Server.Pid): Run then reads the process's CPU
	// time before and after the load and reports the server's CPU per
	// request. 0: not measured.
	Pid int
	// TLS, when set, wraps every connection in TLS with this config.
	TLS *tls.Config
	// User and Password, when Password is set, authenticate every
	// connection (AUTH user password, or AUTH password without User).
	User, Password string
}

func (t Target) label() string {
	switch {
	case t.Name != "":
		return t.Name
	case t.Kind == KindAny:
		return t.Addr
	}
	return t.Kind.String()
}

// Job is one run of a plan: one mode against one target.
type Job struct {
	Target Target
	Mode   string
}

// Plan expands mode names (or family names: gcra, sliding-window,
// sliding-log, fixed-window) into jobs. For a typed target each family runs
// once, in that server's own terms: asking for cl.throttle or lua-gcra runs
// CL.THROTTLE on Sluice and the GCRA script on Redis. A KindAny target runs
// each mode as named. Jobs come grouped by family, targets in the given
// order, so peers sit next to each other in the report. Families with no
// command on a target are skipped and described in notes.
func Plan(names []string, targets []Target) (jobs []Job, notes []string, err error) {
	type famTarget struct {
		family string
		target int
	}
	var families []string
	perFamily := map[string][]Job{}
	seen := map[famTarget]bool{}
	seenAny := map[string]bool{}
	for _, raw := range names {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		ms, err := lookupModeOrFamily(raw)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			if _, ok := perFamily[m.family]; !ok {
				families = append(families, m.family)
				perFamily[m.family] = nil
			}
			for ti, t := range targets {
				if t.Kind == KindAny {
					k := m.name + "\x00" + t.Addr
					if !seenAny[k] {
						seenAny[k] = true
						perFamily[m.family] = append(perFamily[m.family], Job{Target: t, Mode: m.name})
					}
					continue
				}
				ft := famTarget{m.family, ti}
				if seen[ft] {
					continue
				}
				seen[ft] = true
				v := m.forKind(t.Kind)
				if v == nil {
					notes = append(notes, fmt.Sprintf("%s: no %s peer for %s; skipped", t.label(), t.Kind, m.name))
					continue
				}
				perFamily[m.family] = append(perFamily[m.family], Job{Target: t, Mode: v.name})
			}
		}
	}
	for _, f := range families {
		jobs = append(jobs, perFamily[f]...)
	}
	if len(jobs) == 0 && err == nil {
		err = fmt.Errorf("nothing to run for modes %v", names)
	}
	return jobs, notes, err
}

func lookupModeOrFamily(name string) ([]*mode, error) {
	m, err := lookupMode(name)
	if err == nil {
		return []*mode{m}, nil
	}
	var ms []*mode
	fam := strings.ToLower(strings.TrimSpace(name))
	for i := range modes {
		if modes[i].family == fam {
			ms = append(ms, &modes[i])
		}
	}
	if len(ms) == 0 {
		fams := map[string]bool{}
		for _, m := range modes {
			fams[m.family] = true
		}
		list := make([]string, 0, len(fams))
		for f := range fams {
			list = append(list, f)
		}
		sort.Strings(list)
		return nil, fmt.Errorf("%w; families: %s", err, strings.Join(list, ", "))
	}
	return ms, nil
}
