package replication

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger routes Raft's hclog output to log: each hclog line becomes
// one slog record at the matching level, with the line's text (less its
// level tag) as the message.
func newHCLogger(log *slog.Logger) hclog.Logger {
	ctx := context.Background()
	level := hclog.Warn
	switch {
	case log.Enabled(ctx, slog.LevelDebug):
		level = hclog.Debug
	case log.Enabled(ctx, slog.LevelInfo):
		level = hclog.Info
	case !log.Enabled(ctx, slog.LevelError):
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       level,
		Output:      &slogWriter{log: log},
		DisableTime: true,
		Color:       hclog.ColorOff,
	})
}

// slogWriter is an hclog.LevelWriter that forwards to slog.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) { return w.LevelWrite(hclog.Info, p) }

func (w *slogWriter) LevelWrite(level hclog.Level, p []byte) (int, error) {
	var l slog.Level
	switch {
	case level >= hclog.Error:
		l = slog.LevelError
	case level == hclog.Warn:
		l = slog.LevelWarn
	case level == hclog.Info:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	line := bytes.TrimSpace(p)
	if len(line) > 0 && line[0] == '[' {
		if i := bytes.IndexByte(line, ']'); i > 0 {
			line = bytes.TrimSpace(line[i+1:])
		}
	}
	w.log.Log(context.Background(), l, string(line))
	return len(p), nil
}
