package server

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO, CLIENT.

func cmdPing(s *Server, c *client, args [][]byte) {
	switch len(args) {
	case 1:
		if c.subsN.Load() > 0 && !c.resp3 {
			c.writeArray(2) // subscribed, RESP2: a reply that is not a message's
			c.writeBulkString("pong")
			c.writeBulkString("")
			return
		}
		c.writeStatus("PONG")
	case 2:
		if c.subsN.Load() > 0 && !c.resp3 {
			c.writeArray(2)
			c.writeBulkString("pong")
		}
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

// cmdReset: RESET puts the connection back as it was when it connected,
// as Redis's clearClientConnectionState does: the transaction and watched
// keys dropped, MONITOR ended, CLIENT REPLY ON, RESP2, the default user (authenticated only
// if that user needs no password), no name, READONLY and NO-EVICT off. The
// library name and version stay: they still describe the client.
func cmdReset(s *Server, c *client, args [][]byte) {
	c.multi = nil
	c.unwatchAll()
	c.stopMonitor()
	c.endSubscriptions()
	c.stopQueue()
	def := s.acl.defaultUser()
	rules := def.rules.Load()
	c.mu.Lock()
	c.resp3, c.name, c.user = false, "", def
	c.pushResp3.Store(false)
	c.mu.Unlock()
	c.authed = rules.enabled && rules.nopass
	c.readonly = false
	c.noEvict.Store(false)
	c.replyMode = replyOn // so RESET itself is answered
	c.writeStatus("RESET")
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

// cmdAuth: AUTH password (the default user, as requirepass) or AUTH
// username password.
func cmdAuth(s *Server, c *client, args [][]byte) {
	user, pass := "default", args[len(args)-1]
	switch len(args) {
	case 2:
		// As Redis: the one-argument form is an error, not a success,
		// while the default user needs no password.
		if def := s.acl.defaultUser().rules.Load(); def.nopass {
			c.writeError(errNoPass)
			return
		}
	case 3:
		user = string(args[1])
	default:
		c.writeError(errSyntax)
		return
	}
	if err := s.authenticate(c, user, pass, args[0]); err != nil {
		c.writeError(err)
		return
	}
	c.writeOK()
}

// cmdHello: HELLO [protover [AUTH username password] [SETNAME name]].
// Sluice speaks RESP2 only; HELLO 3 answers NOPROTO, on which clients fall
// back to RESP2.
func cmdHello(s *Server, c *client, args [][]byte) {
	proto := int64(0) // no version: keep the connection's
	if len(args) >= 2 {
		v, err := engine.ParseInt64(args[1])
		if err != nil {
			c.writeError(errors.New("Protocol version is not an integer or out of range"))
			return
		}
		if v < 2 || v > 3 {
			c.writeError(errNoProto)
			return
		}
		proto = v
	}
	// Options apply in order, as Redis's: a name is set even when the
	// authentication check that follows refuses.
	for i := 2; i < len(args); i++ {
		switch {
		case isWord(args[i], "auth") && i+2 < len(args):
			if err := s.authenticate(c, string(args[i+1]), args[i+2], args[0]); err != nil {
				c.writeError(err)
				return
			}
			i += 2
		case isWord(args[i], "setname") && i+1 < len(args):
			if err := validName(args[i+1]); err != nil {
				c.writeError(err)
				return
			}
			c.mu.Lock()
			c.name = string(args[i+1])
			c.mu.Unlock()
			i++
		default:
			c.writeError(fmt.Errorf("Syntax error in HELLO option '%s'", args[i]))
			return
		}
	}
	if !c.authed {
		c.writeError(errHelloNoAuth)
		return
	}
	if proto != 0 {
		// Under mu: CLIENT LIST on other connections reads it.
		c.mu.Lock()
		c.resp3 = proto == 3
		c.pushResp3.Store(c.resp3)
		c.mu.Unlock()
	}
	c.writeMap(7)
	c.writeBulkString("server")
	c.writeBulkString("sluice")
	// The Redis version Sluice answers as (INFO's redis_version): clients
	// that gate features on it read this field.
	c.writeBulkString("version")
	c.writeBulkString(redisVersion)
	c.writeBulkString("proto")
	if c.resp3 {
		c.writeInt(3)
	} else {
		c.writeInt(2)
	}
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
