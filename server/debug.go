package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"

	"fmt"
	"strings"
)

// DEBUG CLOCK: the test clock, gated by enable-debug-command.

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
	clk := s.clock
	op := strings.ToLower(string(args[2]))
	switch {
	case op == "get" && len(args) == 3:
		c.writeInt(clk.Now() / 1e6)
	case op == "real" && len(args) == 3:
		clk.Real()
		c.writeOK()
	case (op == "set" || op == "advance") && len(args) == 4:
		ms, err := engine.ParseInt64(args[3])
		if err != nil || ms < 0 || ms > clock.Max/1e6 {
			c.writeError(badArg("milliseconds", args[3], engine.ErrNotInteger))
			return
		}
		if op == "set" {
			err = clk.Set(ms * 1e6)
		} else {
			err = clk.Advance(ms * 1e6)
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
