package server

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/tidwall/match"
)

// Server-level commands: they run on the connection's goroutine after every
// earlier command of the pipeline has completed.

func cmdPing(s *Server, c *client, args [][]byte) {
	switch len(args) {
	case 1:
		c.writeStatus("PONG")
	case 2:
		c.writeBulk(args[1])
	default:
		c.writeError(fmt.Errorf("wrong number of arguments for 'ping' command"))
	}
}

func cmdEcho(s *Server, c *client, args [][]byte) { c.writeBulk(args[1]) }

func cmdQuit(s *Server, c *client, args [][]byte) {
	c.writeOK()
	c.quit = true
}

func cmdSelect(s *Server, c *client, args [][]byte) {
	n, err := engine.ParseInt64(args[1])
	switch {
	case err != nil:
		c.writeError(engine.ErrNotInteger)
	case n != 0:
		c.writeError(errDB)
	default:
		c.writeOK()
	}
}

func cmdDBSize(s *Server, c *client, args [][]byte) { c.writeInt(s.backend.Keys()) }

func cmdTime(s *Server, c *client, args [][]byte) {
	now := s.backend.Clock().Now()
	c.writeArray(2)
	c.writeBulkString(strconv.FormatInt(now/1e9, 10))
	c.writeBulkString(strconv.FormatInt(now%1e9/1e3, 10))
}

// checkPassword compares in constant time is not needed for a shared
// secret checked once per connection, but the comparison must not leak
// the password into logs or replies.
func (s *Server) checkPassword(user, pass string) error {
	want := *s.requirePass.Load()
	if want == "" {
		return errNoPass
	}
	if (user != "" && user != "default") || pass != want {
		return errBadPass
	}
	return nil
}

func cmdAuth(s *Server, c *client, args [][]byte) {
	var user, pass string
	switch len(args) {
	case 2:
		pass = string(args[1])
	case 3:
		user, pass = string(args[1]), string(args[2])
	default:
		c.writeError(errSyntax)
		return
	}
	if err := s.checkPassword(user, pass); err != nil {
		c.writeError(err)
		return
	}
	c.authed = true
	c.writeOK()
}

// cmdHello: HELLO [protover [AUTH username password] [SETNAME name]].
// Sluice speaks RESP2 only; HELLO 3 answers NOPROTO, on which clients fall
// back to RESP2.
func cmdHello(s *Server, c *client, args [][]byte) {
	if len(args) >= 2 {
		v, err := engine.ParseInt64(args[1])
		if err != nil {
			c.writeError(errors.New("Protocol version is not an integer or out of range"))
			return
		}
		if v != 2 {
			c.writeError(errNoProto)
			return
		}
	}
	var setName []byte
	authed := c.authed
	for i := 2; i < len(args); i++ {
		switch {
		case isWord(args[i], "auth") && i+2 < len(args):
			if err := s.checkPassword(string(args[i+1]), string(args[i+2])); err != nil {
				c.writeError(err)
				return
			}
			authed = true
			i += 2
		case isWord(args[i], "setname") && i+1 < len(args):
			setName = args[i+1]
			i++
		default:
			c.writeError(fmt.Errorf("syntax error in HELLO option '%s'", args[i]))
			return
		}
	}
	if !authed {
		c.writeError(errNoAuth)
		return
	}
	c.authed = true
	if setName != nil {
		if err := validName(setName); err != nil {
			c.writeError(err)
			return
		}
		c.mu.Lock()
		c.name = string(setName)
		c.mu.Unlock()
	}
	c.writeArray(14)
	c.writeBulkString("server")
	c.writeBulkString("sluice")
	c.writeBulkString("version")
	c.writeBulkString(s.cfg.Version)
	c.writeBulkString("proto")
	c.writeInt(2)
	c.writeBulkString("id")
	c.writeInt(c.id)
	c.writeBulkString("mode")
	c.writeBulkString(s.mode())
	c.writeBulkString("role")
	c.writeBulkString(s.role())
	c.writeBulkString("modules")
	c.writeArray(0)
}

func (s *Server) mode() string {
	if _, ok := s.clustered(); ok {
		return "cluster"
	}
	return "standalone"
}

func (s *Server) role() string {
	if cl, ok := s.clustered(); ok && !cl.ClusterView().Self.Leader {
		return "replica"
	}
	return "master"
}

func validName(b []byte) error {
	for _, ch := range b {
		if ch <= ' ' || ch > '~' {
			return errors.New("Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

func cmdClient(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "setname" && len(args) == 3:
		if err := validName(args[2]); err != nil {
			c.writeError(err)
			return
		}
		c.mu.Lock()
		c.name = string(args[2])
		c.mu.Unlock()
		c.writeOK()
	case sub == "getname" && len(args) == 2:
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			c.writeNil()
		} else {
			c.writeBulkString(name)
		}
	case sub == "id" && len(args) == 2:
		c.writeInt(c.id)
	case sub == "setinfo" && len(args) == 4:
		attr := strings.ToLower(string(args[2]))
		if attr != "lib-name" && attr != "lib-ver" {
			c.writeError(fmt.Errorf("Unrecognized option '%s'", args[2]))
			return
		}
		if err := validName(args[3]); err != nil {
			c.writeError(err)
			return
		}
		c.mu.Lock()
		if attr == "lib-name" {
			c.libName = string(args[3])
		} else {
			c.libVer = string(args[3])
		}
		c.mu.Unlock()
		c.writeOK()
	case sub == "list" && len(args) == 2:
		s.mu.Lock()
		list := make([]*client, 0, len(s.clients))
		for _, cl := range s.clients {
			list = append(list, cl)
		}
		s.mu.Unlock()
		sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
		var b strings.Builder
		for _, cl := range list {
			b.WriteString(cl.describe())
			b.WriteByte('\n')
		}
		c.writeBulkString(b.String())
	case sub == "info" && len(args) == 2:
		c.writeBulkString(c.describe() + "\n")
	default:
		c.writeError(fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP.", args[1]))
	}
}

func (c *client) describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d db=0 cmd=%s lib-name=%s lib-ver=%s",
		c.id, c.addr, c.nc.LocalAddr(), c.name, int(time.Since(c.created).Seconds()), c.lastCmd, c.libName, c.libVer)
}

// cmdCommand: COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS
// [name...], COMMAND LIST. Everything comes from the command table.
func cmdCommand(s *Server, c *client, args [][]byte) {
	if len(args) == 1 {
		list := sortedCommands()
		c.writeArray(len(list))
		for _, cmd := range list {
			c.writeCommandInfo(cmd)
		}
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "count":
		c.writeInt(int64(len(commands)))
	case "list":
		list := sortedCommands()
		c.writeArray(len(list))
		for _, cmd := range list {
			c.writeBulkString(cmd.name)
		}
	case "info":
		names := args[2:]
		if len(names) == 0 {
			list := sortedCommands()
			c.writeArray(len(list))
			for _, cmd := range list {
				c.writeCommandInfo(cmd)
			}
			return
		}
		c.writeArray(len(names))
		for _, n := range names {
			if cmd := commands[strings.ToLower(string(n))]; cmd != nil {
				c.writeCommandInfo(cmd)
			} else {
				c.out = append(c.out, "*-1\r\n"...)
			}
		}
	case "docs":
		var list []*command
		if len(args) == 2 {
			list = sortedCommands()
		} else {
			for _, n := range args[2:] {
				if cmd := commands[strings.ToLower(string(n))]; cmd != nil {
					list = append(list, cmd)
				}
			}
		}
		c.writeArray(2 * len(list))
		for _, cmd := range list {
			c.writeBulkString(cmd.name)
			c.writeCommandDocs(cmd)
		}
	default:
		c.writeError(fmt.Errorf("unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
	}
}

// writeCommandInfo writes the 10-element reply Redis 7 gives per command.
func (c *client) writeCommandInfo(cmd *command) {
	c.writeArray(10)
	c.writeBulkString(cmd.name)
	c.writeInt(int64(cmd.arity))
	var flags []string
	for _, f := range flagNames {
		if cmd.flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	c.writeArray(len(flags))
	for _, f := range flags {
		c.writeStatus(f)
	}
	c.writeInt(int64(cmd.firstKey))
	c.writeInt(int64(cmd.lastKey))
	c.writeInt(int64(cmd.step))
	c.writeArray(1)
	c.writeStatus("@" + cmd.group)
	c.writeArray(0) // tips
	c.writeArray(0) // key specs
	c.writeArray(0) // subcommands
}

func (c *client) writeCommandDocs(cmd *command) {
	c.writeArray(10)
	c.writeBulkString("summary")
	c.writeBulkString(cmd.summary)
	c.writeBulkString("since")
	c.writeBulkString(cmd.since)
	c.writeBulkString("group")
	c.writeBulkString(cmd.group)
	c.writeBulkString("complexity")
	c.writeBulkString("O(1)")
	c.writeBulkString("arguments")
	c.writeArray(len(cmd.args))
	for _, a := range cmd.args {
		var flags []string
		if a.optional {
			flags = append(flags, "optional")
		}
		if a.multiple {
			flags = append(flags, "multiple")
		}
		n := 4
		if a.typ == "pure-token" {
			n += 2
		}
		if len(flags) > 0 {
			n += 2
		}
		c.writeArray(n)
		c.writeBulkString("name")
		c.writeBulkString(strings.ToLower(strings.Fields(a.name)[0]))
		c.writeBulkString("type")
		typ := a.typ
		if strings.Contains(a.name, " ") && typ != "pure-token" {
			typ = "string"
		}
		c.writeBulkString(typ)
		if a.typ == "pure-token" {
			c.writeBulkString("token")
			c.writeBulkString(a.name)
		}
		if len(flags) > 0 {
			c.writeBulkString("flags")
			c.writeArray(len(flags))
			for _, f := range flags {
				c.writeStatus(f)
			}
		}
	}
}

// cmdConfig: CONFIG GET pattern..., CONFIG SET param value, CONFIG RESETSTAT.
// The settable subset is maxmemory, maxclients and requirepass; the rest
// is read-only and documented as such.
func cmdConfig(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "get" && len(args) >= 3:
		all := s.configValues()
		var keys []string
		for k := range all {
			for _, p := range args[2:] {
				if match.Match(k, strings.ToLower(string(p))) {
					keys = append(keys, k)
					break
				}
			}
		}
		sort.Strings(keys)
		c.writeArray(2 * len(keys))
		for _, k := range keys {
			c.writeBulkString(k)
			c.writeBulkString(all[k])
		}
	case sub == "set" && len(args) >= 4 && len(args)%2 == 0:
		for i := 2; i < len(args); i += 2 {
			if err := s.configSet(strings.ToLower(string(args[i])), string(args[i+1])); err != nil {
				c.writeError(fmt.Errorf("CONFIG SET failed (possibly related to argument '%s') - %w", args[i], err))
				return
			}
		}
		c.writeOK()
	case sub == "resetstat" && len(args) == 2:
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
		"requirepass":      *s.requirePass.Load(),
		"databases":        "1",
		"save":             "",
		"appendonly":       map[bool]string{true: "yes", false: "no"}[s.cfg.Persistence != nil],
		"shards":           strconv.Itoa(s.backend.Shards()),
	}
	if s.cfg.Settings != nil {
		for k, val := range s.cfg.Settings() {
			if _, ok := v[k]; !ok {
				v[k] = val
			}
		}
	}
	return v
}

var errReadOnlyConfig = errors.New("parameter cannot be changed at run time")

func (s *Server) configSet(name, value string) error {
	switch name {
	case "maxmemory":
		n, err := ParseMemory(value)
		if err != nil {
			return err
		}
		s.backend.SetMaxMemory(n)
	case "maxclients":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 1 {
			return errors.New("argument must be a positive integer")
		}
		s.maxClients.Store(n)
	case "requirepass":
		s.requirePass.Store(&value)
	case "maxmemory-policy":
		if value != "noeviction" {
			return errors.New("only noeviction is supported: live limiter state is never evicted")
		}
	default:
		if _, ok := s.configValues()[name]; ok {
			return errReadOnlyConfig
		}
		return errors.New("Unknown option or number of arguments for CONFIG SET")
	}
	return nil
}

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

var errNoPersistence = errors.New("persistence is off (appendonly no)")

func cmdSave(s *Server, c *client, args [][]byte) {
	if s.cfg.Persistence == nil {
		c.writeError(errNoPersistence)
		return
	}
	if err := s.cfg.Persistence.Save(); err != nil {
		c.writeError(err)
		return
	}
	c.writeOK()
}

func cmdBgsave(s *Server, c *client, args [][]byte) {
	if s.cfg.Persistence == nil {
		c.writeError(errNoPersistence)
		return
	}
	if len(args) > 2 || (len(args) == 2 && !isWord(args[1], "schedule")) {
		c.writeError(errSyntax)
		return
	}
	if err := s.cfg.Persistence.BackgroundSave(); err != nil {
		c.writeError(err)
		return
	}
	c.writeStatus("Background saving started")
}

func cmdLastsave(s *Server, c *client, args [][]byte) {
	if s.cfg.Persistence == nil {
		c.writeInt(0)
		return
	}
	c.writeInt(s.cfg.Persistence.LastSave())
}

// cmdDebug: DEBUG CLOCK SET unix_ms | ADVANCE ms | GET | REAL.
func cmdDebug(s *Server, c *client, args [][]byte) {
	switch s.cfg.EnableDebug {
	case DebugYes:
	case DebugLocal:
		if !c.local {
			c.writeError(errDebug)
			return
		}
	default:
		c.writeError(errDebug)
		return
	}
	if !isWord(args[1], "clock") || len(args) < 3 {
		c.writeError(fmt.Errorf("unknown subcommand '%s'. Try DEBUG CLOCK SET|ADVANCE|GET|REAL.", args[1]))
		return
	}
	clock := s.backend.Clock()
	op := strings.ToLower(string(args[2]))
	switch {
	case op == "get" && len(args) == 3:
		c.writeInt(clock.Now() / 1e6)
	case op == "real" && len(args) == 3:
		clock.Real()
		c.writeOK()
	case (op == "set" || op == "advance") && len(args) == 4:
		ms, err := engine.ParseInt64(args[3])
		if err != nil || ms < 0 || ms > engine.MaxTime/1e6 {
			c.writeError(badArg("milliseconds", args[3], engine.ErrNotInteger))
			return
		}
		if op == "set" {
			err = clock.Set(ms * 1e6)
		} else {
			err = clock.Advance(ms * 1e6)
		}
		if err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	default:
		c.writeError(errSyntax)
	}
}

// cmdInfo: INFO [section ...] with server, clients, memory, stats, keyspace.
func cmdInfo(s *Server, c *client, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	st := s.backend.Stats()
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[name] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(name[:1]) + name[1:] + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	uptime := time.Since(s.started)
	section("server",
		"sluice_version:"+s.cfg.Version,
		"redis_version:7.2.0",
		"redis_mode:"+s.mode(),
		"os:"+runtime.GOOS+" "+runtime.GOARCH,
		"go_version:"+runtime.Version(),
		"process_id:"+strconv.Itoa(os.Getpid()),
		"shards:"+strconv.Itoa(s.backend.Shards()),
		"uptime_in_seconds:"+strconv.Itoa(int(uptime.Seconds())),
		"uptime_in_days:"+strconv.Itoa(int(uptime.Hours()/24)),
		"clock_manual:"+strconv.FormatBool(s.backend.Clock().Manual()),
	)
	section("clients",
		"connected_clients:"+strconv.Itoa(s.ConnectedClients()),
		"maxclients:"+strconv.FormatInt(s.maxClients.Load(), 10),
	)
	perKey := "0"
	if st.Keys > 0 {
		perKey = strconv.FormatFloat(float64(st.Memory)/float64(st.Keys), 'f', 1, 64)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	section("memory",
		"used_memory:"+strconv.FormatInt(st.Memory, 10),
		"used_memory_human:"+humanBytes(st.Memory),
		"used_memory_per_key:"+perKey,
		"used_memory_heap:"+strconv.FormatUint(ms.HeapAlloc, 10),
		"used_memory_rss_estimate:"+strconv.FormatUint(ms.Sys, 10),
		"maxmemory:"+strconv.FormatInt(s.backend.MaxMemory(), 10),
		"maxmemory_human:"+humanBytes(s.backend.MaxMemory()),
		"maxmemory_policy:noeviction",
		"gc_cycles:"+strconv.FormatUint(uint64(ms.NumGC), 10),
	)
	section("stats",
		"total_connections_received:"+strconv.FormatInt(s.connections.Load(), 10),
		"rejected_connections:"+strconv.FormatInt(s.rejected.Load(), 10),
		"total_commands_processed:"+strconv.FormatInt(s.commandsN.Load(), 10),
		"decisions_allowed:"+strconv.FormatInt(st.Allowed, 10),
		"decisions_limited:"+strconv.FormatInt(st.Limited, 10),
		"expired_keys:"+strconv.FormatInt(st.Swept, 10),
		"keys_swept:"+strconv.FormatInt(st.Swept, 10),
		"evicted_keys:0",
	)
	section("replication", s.replicationLines()...)
	clusterEnabled := "0"
	if _, ok := s.clustered(); ok {
		clusterEnabled = "1"
	}
	section("cluster", "cluster_enabled:"+clusterEnabled)
	persistence := []string{"aof_enabled:0"}
	if s.cfg.Persistence != nil {
		persistence = s.cfg.Persistence.InfoLines()
	}
	section("persistence", persistence...)
	keyspace := []string{}
	if st.Keys > 0 {
		keyspace = append(keyspace, "db0:keys="+strconv.FormatInt(st.Keys, 10)+",expires=0,avg_ttl=0")
	}
	section("keyspace", keyspace...)
	c.writeBulkString(b.String())
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + "G"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + "M"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 2, 64) + "K"
	}
	return strconv.FormatInt(n, 10) + "B"
}
