package server

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/glob"
)

// CONFIG GET, SET and RESETSTAT.

// cmdConfig: CONFIG GET pattern..., CONFIG SET param value, CONFIG RESETSTAT.
// The settable subset is maxmemory, maxclients, timeout, tcp-keepalive,
// reqid-window,
// requirepass, busy-reply-threshold (lua-time-limit) and
// script-acceleration; the rest
// is read-only and documented as such.
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
		// The tls-* settings of one CONFIG SET change together: a new
		// certificate and its key are one change.
		tlsChanges := map[string]string{}
		for i := 2; i < len(args); i += 2 {
			name := strings.ToLower(string(args[i]))
			if strings.HasPrefix(name, "tls-") && name != "tls-port" && name != "tls-cluster" && name != "tls-replication" {
				tlsChanges[name] = string(args[i+1])
				continue
			}
			if err := s.configSet(name, string(args[i+1])); err != nil {
				c.writeError(fmt.Errorf("CONFIG SET failed (possibly related to argument '%s') - %w", args[i], err))
				return
			}
		}
		if len(tlsChanges) > 0 {
			if err := s.configSetTLS(tlsChanges); err != nil {
				c.writeError(fmt.Errorf("CONFIG SET failed (possibly related to argument 'tls-*') - %w", err))
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
		"timeout":          strconv.FormatInt(s.idle.Load()/int64(time.Second), 10),
		"tcp-keepalive":    strconv.FormatInt(max(s.keepAlive.Load(), 0)/int64(time.Second), 10),
		"reqid-window":     strconv.FormatInt(s.reqIDWindow.Load()/int64(time.Second), 10),
		"requirepass":      *s.requirePass.Load(),
		"databases":        "1",
		"save":             "",
		"appendonly":       map[bool]string{true: "yes", false: "no"}[s.cfg.Persistence != nil],
		"shards":           strconv.Itoa(s.backend.Shards()),
		// Redis 7 names it both ways.
		"busy-reply-threshold": strconv.FormatInt(s.scripts.BusyThreshold().Milliseconds(), 10),
		"lua-time-limit":       strconv.FormatInt(s.scripts.BusyThreshold().Milliseconds(), 10),
		"script-acceleration":  map[bool]string{true: "no", false: "yes"}[s.scripts.accel.off.Load()],
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
	return v
}

var errReadOnlyConfig = errors.New("parameter cannot be changed at run time")

// configSetTLS changes tls-* settings together and reloads the files: new
// handshakes take them, open connections keep theirs.
func (s *Server) configSetTLS(changes map[string]string) error {
	if s.cfg.TLS == nil {
		return errors.New("TLS is not enabled (tls-port is 0)")
	}
	return s.cfg.TLS.setMany(changes)
}

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
	case "timeout", "tcp-keepalive":
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
	case "reqid-window":
		// Seconds; applies to decisions parsed from now on.
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 1 || n > engine.MaxReqIDWindow/int64(time.Second) {
			return fmt.Errorf("argument must be a number of seconds from 1 to %d", engine.MaxReqIDWindow/int64(time.Second))
		}
		s.reqIDWindow.Store(int64(time.Duration(n) * time.Second))
	case "requirepass":
		ops := [][]byte{[]byte("resetpass"), []byte("nopass")}
		if value != "" {
			ops[1] = append([]byte(">"), value...)
		}
		// The default user's password: in cluster mode, on every node.
		if err := s.aclSetUser("default", ops); err != nil {
			return err
		}
		s.requirePass.Store(&value)
	case "busy-reply-threshold", "lua-time-limit":
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms < 0 || ms > 1<<40 {
			return errors.New("argument must be a number of milliseconds")
		}
		s.scripts.SetBusyThreshold(time.Duration(ms) * time.Millisecond)
	case "script-acceleration":
		switch strings.ToLower(value) {
		case "yes":
			s.scripts.SetAcceleration(true)
		case "no":
			s.scripts.SetAcceleration(false)
		default:
			return errors.New("argument must be 'yes' or 'no'")
		}
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
