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
