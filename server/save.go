package server

import "errors"

// SAVE, BGSAVE and LASTSAVE, served by the backend's Persister.

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

// cmdShutdown: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. As in Redis,
// a shutdown that starts answers nothing: the connection closes with the
// others. NOW and FORCE are accepted (nothing waits for replicas here).
func cmdShutdown(s *Server, c *client, args [][]byte) {
	save, abort := true, false
	for _, a := range args[1:] {
		switch {
		case isWord(a, "nosave"):
			save = false
		case isWord(a, "save"), isWord(a, "now"), isWord(a, "force"):
		case isWord(a, "abort"):
			abort = true
		default:
			c.writeError(errSyntax)
			return
		}
	}
	switch {
	case abort && len(args) > 2:
		c.writeError(errSyntax)
	case abort:
		c.writeError(errors.New("No shutdown in progress."))
	case s.cfg.Shutdown == nil:
		c.writeError(errors.New("SHUTDOWN is not available in this server (it is embedded; stop its process instead)"))
	default:
		s.log.Info("SHUTDOWN requested", "client", c.addr, "save", save)
		s.cfg.Shutdown(save)
		c.quit = true
	}
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
