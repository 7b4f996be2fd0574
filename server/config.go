package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/glob"
)

// CONFIG GET, SET and RESETSTAT.

// cmdConfig: CONFIG GET pattern..., CONFIG SET param value, CONFIG RESETSTAT.
// The settable subset is runtimeSettings, the program's OwnSettings
// (loglevel) and the tls-* files; the rest is read-only and documented as
// such. CONFIG REWRITE writes the settable ones into the config file.
func cmdConfig(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "get" && len(args) >= 3:
		all := s.configValues()
		var keys []string
		for k := range all {
			for _, p := range args[2:] {
				if glob.MatchFold(string(p), k) {
					keys = append(keys, k)
					break
				}
			}
		}
		sort.Strings(keys)
		c.writeMap(len(keys))
		for _, k := range keys {
			c.writeBulkString(k)
			c.writeBulkString(all[k])
		}
	case sub == "set" && len(args) >= 4 && len(args)%2 == 0:
		if err := s.configSetAll(args[2:]); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	case sub == "resetstat" && len(args) == 2:
		s.resetStats()
		c.writeOK()
	case sub == "rewrite" && len(args) == 2:
		if err := s.configRewrite(); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	default:
		c.writeError(fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CONFIG HELP.", args[1]))
	}
}

func (s *Server) configValues() map[string]string {
	v := map[string]string{
		"maxmemory":        strconv.FormatInt(s.backend.MaxMemory(), 10),
		"maxmemory-policy": "noeviction",
		"maxclients":       strconv.FormatInt(s.maxClients.Load(), 10),
		"timeout":          strconv.FormatInt(s.idle.Load()/int64(time.Second), 10),
		"tcp-keepalive":    strconv.FormatInt(max(s.keepAlive.Load(), 0)/int64(time.Second), 10),
		"reqid-window":     strconv.FormatInt(s.reqIDWindow.Load()/int64(time.Second), 10),
		"requirepass":      *s.requirePass.Load(),
		"databases":        "1",
		"save":             "",
		"appendonly":       map[bool]string{true: "yes", false: "no"}[s.cfg.Persistence != nil],
		"shards":           strconv.Itoa(s.backend.Shards()),
		// Redis 7 names it both ways.
		"busy-reply-threshold":       strconv.FormatInt(s.scripts.BusyThreshold().Milliseconds(), 10),
		"lua-time-limit":             strconv.FormatInt(s.scripts.BusyThreshold().Milliseconds(), 10),
		"script-acceleration":        map[bool]string{true: "no", false: "yes"}[s.scripts.accel.off.Load()],
		"hotkeys-tracking":           s.hotKeysTracking(),
		"client-output-buffer-limit": s.obuf.Load().String(),
		"client-query-buffer-limit":  strconv.FormatInt(s.qbufLimit.Load(), 10),
		"auth-max-failures":          strconv.FormatInt(max(s.authMaxFailures.Load(), 0), 10),
	}
	stats := s.stats.config()
	for k, val := range stats.values() {
		v[k] = val
	}
	if s.cfg.TLS != nil {
		for k, val := range s.cfg.TLS.values() {
			v[k] = val
		}
	}
	if s.cfg.Settings != nil {
		for k, val := range s.cfg.Settings() {
			if _, ok := v[k]; !ok {
				v[k] = val
			}
		}
	}
	for k, own := range s.cfg.OwnSettings {
		v[k] = own.Get()
	}
	if f, ok := s.cfg.Persistence.(FsyncSetter); ok {
		v["appendfsync"] = f.AppendFsync()
	}
	return v
}

// resetStats is CONFIG RESETSTAT: the counters Redis's resetServerStats
// zeroes (commands, connections, rejections, expired keys, buffer-limit
// closes) and the engine's decision, receipt and lease counters. The ACL
// denial counters stay, as in Redis (ACL LOG RESET is theirs).
func (s *Server) resetStats() {
	s.stats.reset() // commandstats, errorstats, latencystats; not the slow log
	for _, c := range []*atomic.Int64{&s.commandsN, &s.connections, &s.rejected, &s.qbufClosed, &s.obufClosed} {
		c.Store(0)
	}
	s.backend.ResetStats()
}

// runtimeSettings are the settings configSet changes (besides the
// program's OwnSettings and the tls-* files): what CONFIG REWRITE writes
// back. lua-time-limit is busy-reply-threshold's other name.
var runtimeSettings = []string{
	"maxmemory", "maxclients", "timeout", "tcp-keepalive", "reqid-window", "requirepass",
	"busy-reply-threshold", "script-acceleration", "client-output-buffer-limit",
	"client-query-buffer-limit", "auth-max-failures", "hotkeys-tracking", "appendfsync",
	"slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold", "latency-tracking",
	"latency-tracking-info-percentiles",
}

var errNoConfigFile = errors.New("The server is running without a config file")

// configRewrite hands the run-time settings' current values to the
// program's Rewrite, which owns the file.
func (s *Server) configRewrite() error {
	s.configMu.Lock()
	defer s.configMu.Unlock()
	if s.cfg.Rewrite == nil {
		return errNoConfigFile
	}
	all := s.configValues()
	settings := make(map[string]string, len(runtimeSettings)+len(s.cfg.OwnSettings))
	for _, name := range runtimeSettings {
		if v, ok := all[name]; ok { // appendfsync only with an append-only file
			settings[name] = v
		}
	}
	for name := range s.cfg.OwnSettings {
		settings[name] = all[name]
	}
	if s.cfg.TLS != nil {
		for k, val := range s.cfg.TLS.values() {
			settings[k] = val
		}
	}
	if err := s.cfg.Rewrite(settings); err != nil {
		s.log.Warn("CONFIG REWRITE failed", "err", err)
		return fmt.Errorf("Rewriting config file: %w", err)
	}
	s.log.Warn("CONFIG REWRITE executed with success.")
	return nil
}

// errReadOnlyConfig is Redis's word for a setting only a restart changes.
var errReadOnlyConfig = errors.New("can't set immutable config")

// configSetAll is CONFIG SET name value [name value ...], all or nothing
// as in Redis 7: every name is checked first (unknown, read-only,
// repeated: nothing is set), then the values are set in order, and when
// one is refused the ones set before it get their old values back. The
// tls-* settings of one CONFIG SET change together, last: a new
// certificate and its key are one change.
func (s *Server) configSetAll(pairs [][]byte) error {
	s.configMu.Lock()
	defer s.configMu.Unlock()
	type change struct {
		arg, value, old string
		set             func(string) error
	}
	var changes []change
	tlsChanges := map[string]string{}
	seen := map[string]bool{}
	before := s.configValues()
	for i := 0; i < len(pairs); i += 2 {
		arg, name := string(pairs[i]), strings.ToLower(string(pairs[i]))
		if seen[name] {
			return fmt.Errorf("CONFIG SET failed (possibly related to argument '%s') - duplicate parameter", arg)
		}
		seen[name] = true
		if strings.HasPrefix(name, "tls-") && name != "tls-port" && name != "tls-cluster" && name != "tls-replication" {
			tlsChanges[name] = string(pairs[i+1])
			continue
		}
		set, err := s.setter(name)
		switch {
		case err == errUnknownSetting:
			// Redis words an unknown name apart from a refused value.
			return fmt.Errorf("%w - '%s'", err, arg)
		case err != nil:
			return fmt.Errorf("CONFIG SET failed (possibly related to argument '%s') - %w", arg, err)
		}
		changes = append(changes, change{arg: arg, value: string(pairs[i+1]), old: before[name], set: set})
	}
	undo := func(done []change) {
		for _, ch := range slices.Backward(done) {
			if err := ch.set(ch.old); err != nil {
				s.log.Error("CONFIG SET: could not restore a setting after a refused one", "setting", ch.arg, "value", ch.old, "err", err)
			}
		}
	}
	for i, ch := range changes {
		if err := ch.set(ch.value); err != nil {
			undo(changes[:i])
			return fmt.Errorf("CONFIG SET failed (possibly related to argument '%s') - %w", ch.arg, err)
		}
	}
	if len(tlsChanges) > 0 {
		if err := s.configSetTLS(tlsChanges); err != nil {
			undo(changes)
			return fmt.Errorf("CONFIG SET failed (possibly related to argument 'tls-*') - %w", err)
		}
	}
	return nil
}

// configSetTLS changes tls-* settings together and reloads the files: new
// handshakes take them, open connections keep theirs.
func (s *Server) configSetTLS(changes map[string]string) error {
	if s.cfg.TLS == nil {
		return errors.New("TLS is not enabled (tls-port is 0)")
	}
	return s.cfg.TLS.setMany(changes)
}

// setter returns the function that sets name at run time, or
// errUnknownSetting, or errReadOnlyConfig for a setting CONFIG GET shows
// but only a restart changes. Looking a name up changes nothing, so CONFIG
// SET can check every name before it sets any.
func (s *Server) setter(name string) (func(value string) error, error) {
	switch name {
	case "maxmemory":
		return func(value string) error {
			n, err := ParseMemory(value)
			if err != nil {
				return err
			}
			s.backend.SetMaxMemory(n)
			return nil
		}, nil
	case "maxclients":
		return func(value string) error {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 1 {
				return errors.New("argument must be a positive integer")
			}
			s.maxClients.Store(n)
			return nil
		}, nil
	case "timeout", "tcp-keepalive":
		return func(value string) error {
			// Seconds; 0 turns either off. New idle limits apply at a
			// connection's next read, keepalive to new connections.
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || n > 1<<31 {
				return errors.New("argument must be a number of seconds, 0 or more")
			}
			d := time.Duration(n) * time.Second
			if name == "timeout" {
				s.idle.Store(int64(d))
			} else {
				s.keepAlive.Store(int64(d))
			}
			return nil
		}, nil
	case "reqid-window":
		return func(value string) error {
			// Seconds; applies to decisions parsed from now on.
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 1 || n > engine.MaxReqIDWindow/int64(time.Second) {
				return fmt.Errorf("argument must be a number of seconds from 1 to %d", engine.MaxReqIDWindow/int64(time.Second))
			}
			s.reqIDWindow.Store(int64(time.Duration(n) * time.Second))
			return nil
		}, nil
	case "requirepass":
		return func(value string) error {
			ops := [][]byte{[]byte("resetpass"), []byte("nopass")}
			if value != "" {
				ops[1] = append([]byte(">"), value...)
			}
			// The default user's password: in cluster mode, on every node.
			if err := s.aclSetUser("default", ops); err != nil {
				return err
			}
			s.requirePass.Store(&value)
			return nil
		}, nil
	case "busy-reply-threshold", "lua-time-limit":
		return func(value string) error {
			ms, err := strconv.ParseInt(value, 10, 64)
			if err != nil || ms < 0 || ms > 1<<40 {
				return errors.New("argument must be a number of milliseconds")
			}
			s.scripts.SetBusyThreshold(time.Duration(ms) * time.Millisecond)
			return nil
		}, nil
	case "script-acceleration":
		return func(value string) error {
			switch strings.ToLower(value) {
			case "yes":
				s.scripts.SetAcceleration(true)
			case "no":
				s.scripts.SetAcceleration(false)
			default:
				return errors.New("argument must be 'yes' or 'no'")
			}
			return nil
		}, nil
	case "hotkeys-tracking":
		return s.setHotKeysTracking, nil
	case "client-output-buffer-limit":
		return func(value string) error {
			// Redis splits the value at every single space (two spaces make
			// an empty word); an empty value changes nothing.
			var words []string
			if value != "" {
				words = strings.Split(value, " ")
			}
			for {
				old := s.obuf.Load()
				l := *old
				if err := l.set(words); err != nil {
					return err
				}
				if s.obuf.CompareAndSwap(old, &l) {
					break
				}
			}
			return nil
		}, nil
	case "client-query-buffer-limit":
		return func(value string) error {
			n, err := ParseQueryBufferLimit(value)
			if err != nil {
				return err
			}
			s.qbufLimit.Store(n)
			return nil
		}, nil
	case "slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold", "latency-tracking", "latency-tracking-info-percentiles":
		return func(value string) error { return s.stats.set(name, value) }, nil
	case "maxmemory-policy":
		return func(value string) error {
			if value != "noeviction" {
				return errors.New("only noeviction is supported: live limiter state is never evicted")
			}
			return nil
		}, nil
	case "appendfsync":
		return func(value string) error {
			f, ok := s.cfg.Persistence.(FsyncSetter)
			if !ok {
				return errors.New("appendonly is off: there is no append-only file to fsync")
			}
			return f.SetAppendFsync(value)
		}, nil
	case "auth-max-failures":
		return func(value string) error {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || n > 1<<31 {
				return errors.New("argument must be a number of attempts, 0 (never) or more")
			}
			s.authMaxFailures.Store(n)
			return nil
		}, nil
	default:
		if own, ok := s.cfg.OwnSettings[name]; ok {
			return own.Set, nil
		}
		if _, ok := s.configValues()[name]; ok {
			return nil, errReadOnlyConfig
		}
		return nil, errUnknownSetting
	}
}

var errLogLevel = errors.New("argument(s) must be one of the following: debug, verbose, notice, warning")

// ParseLogLevel reads Redis's loglevel names (and info, warn) as slog
// levels: verbose sits between debug and info, notice is info.
func ParseLogLevel(name string) (slog.Level, error) {
	switch strings.ToLower(name) {
	case "debug":
		return slog.LevelDebug, nil
	case "verbose", "info":
		return slog.LevelInfo - 1, nil
	case "notice":
		return slog.LevelInfo, nil
	case "warning", "warn":
		return slog.LevelWarn, nil
	}
	return 0, errLogLevel
}

// logLevelName is ParseLogLevel's inverse.
func logLevelName(l slog.Level) string {
	switch {
	case l <= slog.LevelDebug:
		return "debug"
	case l < slog.LevelInfo:
		return "verbose"
	case l < slog.LevelWarn:
		return "notice"
	}
	return "warning"
}

// LogLevelSetting is loglevel as a run-time setting of a program's logger.
func LogLevelSetting(v *slog.LevelVar) Setting {
	return Setting{Get: func() string { return logLevelName(v.Level()) }, Set: func(name string) error {
		l, err := ParseLogLevel(name)
		if err == nil {
			v.Set(l)
		}
		return err
	}}
}

var errUnknownSetting = errors.New("Unknown option or number of arguments for CONFIG SET")

// ParseMemory reads a Redis memory size: 1024, 100kb, 512mb, 2gb, 1k ...
func ParseMemory(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid memory size '%s'", v)
	}
	return n * mult, nil
}

// Client classes of client-output-buffer-limit, in Redis's order. Sluice's
// connections are all of the normal class: it has neither Redis replicas
// nor pub/sub clients, so the other two limits are kept and reported only.
const (
	ClassNormal = iota
	ClassReplica
	ClassPubSub
)

// OutputBufferLimit is one class's client-output-buffer-limit: a
// connection owing Hard bytes of replies or more, or owing Soft bytes or
// more for longer than SoftSeconds, is closed. 0 is no limit.
type OutputBufferLimit struct {
	Hard, Soft  uint64
	SoftSeconds int64
}

// OutputBufferLimits is client-output-buffer-limit, per class. As a
// flag.Value it takes Redis's syntax, "<class> <hard> <soft>
// <soft-seconds>" repeated, and changes only the classes named.
type OutputBufferLimits [3]OutputBufferLimit

// DefaultOutputBufferLimits are Redis's: normal 0 0 0, replica 256mb
// 64mb 60, pubsub 32mb 8mb 60.
func DefaultOutputBufferLimits() OutputBufferLimits {
	return OutputBufferLimits{{}, {256 << 20, 64 << 20, 60}, {32 << 20, 8 << 20, 60}}
}

// String is the value as CONFIG GET gives it, Redis's words and order.
func (l *OutputBufferLimits) String() string {
	var b strings.Builder
	for i, name := range []string{"normal", "slave", "pubsub"} {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s %d %d %d", name, l[i].Hard, l[i].Soft, l[i].SoftSeconds)
	}
	return b.String()
}

// Set applies a config-file or command-line value, whose words any run of
// white space separates.
func (l *OutputBufferLimits) Set(value string) error { return l.set(strings.Fields(value)) }

// set applies <class> <hard> <soft> <soft-seconds> groups, all or none, as
// Redis 7 reads them: classes normal, replica (or slave) and pubsub in any
// case; sizes as memory values; the seconds a C int, not negative.
func (l *OutputBufferLimits) set(words []string) error {
	if len(words)%4 != 0 {
		return errors.New("Wrong number of arguments in buffer limit configuration.")
	}
	next := *l
	for i := 0; i < len(words); i += 4 {
		class := -1
		switch asciiLower(cString(words[i])) {
		case "normal":
			class = ClassNormal
		case "slave", "replica":
			class = ClassReplica
		case "pubsub":
			class = ClassPubSub
		}
		if class < 0 {
			return errors.New("Invalid client class specified in buffer limit configuration.")
		}
		hard, okHard := memToULL(words[i+1])
		soft, okSoft := memToULL(words[i+2])
		secs, okSecs := strtoll(words[i+3])
		if !okHard || !okSoft || !okSecs || int32(secs) < 0 {
			return errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		next[class] = OutputBufferLimit{Hard: hard, Soft: soft, SoftSeconds: int64(int32(secs))}
	}
	*l = next
	return nil
}

// DefaultQueryBufferLimit is client-query-buffer-limit's default, Redis's.
const DefaultQueryBufferLimit = 1 << 30

// ParseQueryBufferLimit reads a client-query-buffer-limit value as Redis 7
// does: a memory value from 1mb to 2^63-1 bytes, with its error texts.
func ParseQueryBufferLimit(value string) (int64, error) {
	n, ok := memToULL(value)
	if !ok {
		return 0, errors.New("argument must be a memory value")
	}
	if n < 1<<20 || n > math.MaxInt64 {
		return 0, errors.New("argument must be between 1048576 and 9223372036854775807 inclusive")
	}
	return int64(n), nil
}

// memToULL reads a memory value as Redis's memtoull does: digits, then
// nothing or a unit (b, k, m, g powers of 1000, kb, mb, gb of 1024, in any
// case). As in C, too many digits saturate and the multiplication wraps;
// no digits at all is 0.
func memToULL(v string) (uint64, bool) {
	v = cString(v)
	if strings.HasPrefix(v, "-") {
		return 0, false
	}
	i := 0
	for i < len(v) && '0' <= v[i] && v[i] <= '9' {
		i++
	}
	var mul uint64
	switch asciiLower(v[i:]) {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1 << 10
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1 << 20
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1 << 30
	default:
		return 0, false
	}
	if i >= 128 {
		return 0, false
	}
	var n uint64
	for _, d := range v[:i] {
		if n > (math.MaxUint64-uint64(d-'0'))/10 {
			n = math.MaxUint64
			break
		}
		n = n*10 + uint64(d-'0')
	}
	return n * mul, true
}

// strtoll reads a whole word as C's strtoll(s, &end, 10) with *end == 0:
// leading white space, a sign, decimal digits, saturating; an empty word is
// 0.
func strtoll(v string) (int64, bool) {
	v = cString(v)
	i := 0
	for i < len(v) && strings.IndexByte(" \t\n\v\f\r", v[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(v) && (v[i] == '+' || v[i] == '-') {
		neg = v[i] == '-'
		i++
	}
	start := i
	var n uint64
	for ; i < len(v) && '0' <= v[i] && v[i] <= '9'; i++ {
		if n > 1<<63/10 {
			n = 1 << 63
		} else {
			n = min(n*10+uint64(v[i]-'0'), 1<<63)
		}
	}
	switch {
	case i == start:
		return 0, v == "" // no digits: end is the word's start
	case i < len(v):
		return 0, false
	case neg && n == 1<<63:
		return math.MinInt64, true
	case neg:
		return -int64(n), true
	}
	return int64(min(n, math.MaxInt64)), true
}

// cString is s as C sees it: up to its first NUL byte.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// asciiLower lowercases ASCII letters only, as strcasecmp compares.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
