package server

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluicehq/sluice/engine"
)

// Hot keys: LIMIT.HOTKEYS, the hotkeys-tracking setting, INFO's line and
// the metrics, over the engine's per-shard sketches (engine/hotkeys.go).

// HotKeys is what they need of the engine. *engine.Engine implements it;
// Config.HotKeys supplies it when the backend wraps the engine.
type HotKeys interface {
	HotKeys(by engine.HotKeyBy, n int, now int64) []engine.HotKey
	HotKeysTracking() bool
	SetHotKeysTracking(on bool)
}

var _ HotKeys = (*engine.Engine)(nil)

// defaultHotKeysCount is LIMIT.HOTKEYS's COUNT when none is given, and
// how many keys of each ranking the metrics export.
const defaultHotKeysCount = 10

var (
	errHotKeysOff     = errors.New("hot-key tracking is off (CONFIG SET hotkeys-tracking yes turns it on)")
	errHotKeysMissing = errors.New("hot-key tracking is not available on this server")
	errHotKeysBy      = errors.New("must be decisions or refusals")
	errHotKeysCount   = fmt.Errorf("must be at most %d", engine.HotKeysCapacity)
)

func (s *Server) hotKeys() (HotKeys, bool) {
	if s.cfg.HotKeys != nil {
		return s.cfg.HotKeys, true
	}
	h, ok := s.backend.(HotKeys)
	return h, ok
}

// hotKeysTracking is hotkeys-tracking's value for CONFIG GET and INFO.
func (s *Server) hotKeysTracking() string {
	if h, ok := s.hotKeys(); ok && h.HotKeysTracking() {
		return "yes"
	}
	return "no"
}

// setHotKeysTracking serves CONFIG SET hotkeys-tracking.
func (s *Server) setHotKeysTracking(value string) error {
	on, err := ParseYesNo(value)
	if err != nil {
		return err
	}
	h, ok := s.hotKeys()
	if !ok {
		return errHotKeysMissing
	}
	h.SetHotKeysTracking(on)
	return nil
}

// ParseYesNo reads a yes|no setting, as CONFIG SET and the flags take it.
func ParseYesNo(value string) (bool, error) {
	switch {
	case isWord([]byte(value), "yes"):
		return true, nil
	case isWord([]byte(value), "no"):
		return false, nil
	}
	return false, errors.New("argument must be 'yes' or 'no'")
}

// cmdLimitHotKeys: LIMIT.HOTKEYS [BY decisions|refusals] [COUNT n]. Each
// entry is [key, count, error, rate]: count is the key's decisions (or
// refusals) in the current and previous 10 s window, at most error above
// the truth; rate is per second over the last 10 s, rounded to 3 decimals
// (a bulk string in RESP2, a double in RESP3).
func cmdLimitHotKeys(s *Server, c *client, args [][]byte) {
	by, n := engine.HotByDecisions, int64(defaultHotKeysCount)
	for i := 1; i < len(args); i += 2 {
		if i+1 == len(args) {
			c.writeError(errSyntax)
			return
		}
		v := args[i+1]
		switch {
		case isWord(args[i], "by") && isWord(v, "decisions"):
			by = engine.HotByDecisions
		case isWord(args[i], "by") && isWord(v, "refusals"):
			by = engine.HotByRefusals
		case isWord(args[i], "by"):
			c.writeError(badArg("BY", v, errHotKeysBy))
			return
		case isWord(args[i], "count"):
			var err error
			if n, err = parseInt("COUNT", v); err != nil {
				c.writeError(err)
				return
			}
			if n < 1 {
				c.writeError(badArg("COUNT", v, errNotPositive))
				return
			}
			if n > engine.HotKeysCapacity {
				c.writeError(badArg("COUNT", v, errHotKeysCount))
				return
			}
		default:
			c.writeError(errSyntax)
			return
		}
	}
	h, ok := s.hotKeys()
	switch {
	case !ok:
		c.writeError(errHotKeysMissing)
		return
	case !h.HotKeysTracking():
		c.writeError(errHotKeysOff)
		return
	}
	top := h.HotKeys(by, int(n), s.clock.Now())
	c.writeArray(len(top))
	for _, k := range top {
		c.writeArray(4)
		c.writeBulk(k.Key)
		c.writeInt(k.Count)
		c.writeInt(k.Err)
		c.writeRate(k.Rate)
	}
}

// formatRate rounds a rate to 3 decimals, the precision a per-second
// estimate from counts over 10 s warrants.
func formatRate(r float64) string {
	return strconv.FormatFloat(math.Round(r*1000)/1000, 'f', -1, 64)
}

func (c *client) writeRate(r float64) {
	if !c.resp3 {
		c.writeBulkString(formatRate(r))
		return
	}
	c.out = append(c.out, ',')
	c.out = append(c.out, formatRate(r)...)
	c.out = append(c.out, '\r', '\n')
}
