package script_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server/script"
)

// killCases are scripts that never end: SCRIPT KILL stops them on
// redis-server, a cancelled context in Sluice, with the same reply.
var killCases = []string{
	"local i = 0 while true do i = i + 1 end",
	"local i = 0\nwhile true do\n  i = i + 1\nend",
	"local function spin()\n  while true do end\nend\nspin()",
	"while true do pcall(function() while true do end end) end",
	"local ok, e = pcall(function() while true do end end) return {tostring(ok), e}",
	"local n = 0\nfor i = 1, 1e300 do\n  n = n + i\nend",
	"local n = 0\nrepeat\n  n = n + 1\nuntil false",
	"local t = {}\nfor k, v in function() return 1, 2 end do\n  t[1] = k\nend",
	"local function f(n)\n  return f(n + 1)\nend\nreturn f(1)",
	"redis.call('SET', 'killed', 'no')\nwhile true do end",
}

var anyLine = regexp.MustCompile(`:\d+\.\r\n$`)

func TestDifferentialKill(t *testing.T) {
	b := sluicetest.StartRedis(t, "--busy-reply-threshold", "100")
	a := sluicetest.StartRedis(t)
	host := dial(t, a)
	host.must(t, "HELLO", "3")
	runner := dial(t, b)
	killer := dial(t, b)
	eng := script.New(script.Config{})
	for _, body := range killCases {
		if strings.Contains(body, "SET") {
			// A script that wrote cannot be killed in Redis (UNKILLABLE);
			// Sluice's Engine stops on its context either way: that
			// refusal is the server's.
			continue
		}
		done := make(chan string, 1)
		go func() {
			out, err := runner.do("EVAL", body, "0")
			if err != nil {
				out = err.Error()
			}
			done <- out
		}()
		time.Sleep(300 * time.Millisecond)
		if k := killer.must(t, "SCRIPT", "KILL"); k != "+OK\r\n" {
			t.Fatalf("SCRIPT KILL: %q", k)
		}
		want := <-done

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		rep := eng.Run(ctx, []byte(body), nil, nil, &forwardHost{tb: t, c: host})
		cancel()
		got := string(encode(nil, &rep, 2))
		// Redis stops a script at its count hook, every 100000 of its
		// instructions; gopher-lua's instructions are not Lua's, so the
		// line a loop is stopped on may be another line of the loop.
		if strings.Count(body, "\n") > 0 {
			want, got = anyLine.ReplaceAllString(want, ":N."), anyLine.ReplaceAllString(got, ":N.")
		}
		if got != want {
			t.Errorf("%q\n  redis:  %q\n  sluice: %q", body, want, got)
		}
	}
}
