package limiters

import "testing"

// Debian's python3-limits (redis storage over redis-py): fixed window
// (INCRBY and EXPIRE in a script), moving window (LPUSH of Lua numbers,
// LTRIM and EXPIRE in one script, LRANGE in another, a Lua nil inside the
// table it returns), clear (DEL) and reset (a script running KEYS and
// DEL); redis-py runs scripts with EVALSHA, loading them on NOSCRIPT.
// The fixed window's script and both moving window scripts must have run
// natively on Sluice (server/scriptaccel_limits.go).
func TestPythonLimits(t *testing.T) {
	py := pythonLimits(t)
	redisTr, sluiceTr := differential(t, []string{"limits_incr_expire", "limits_moving_window", "limits_acquire_moving_window"}, func(e endpoint) []any {
		return runProgram(t, e, py, "../clients/python/limits_scenario.py", e.addr)
	})
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"check/ok": true, "fixed hit alice 3/allowed": true, "fixed hit alice 4/allowed": false,
		"fixed test alice/allowed": false, "fixed stats alice/remaining": 0, "stored fixed alice/value": "4",
		"fixed hit bob cost 2/allowed": true, "fixed hit bob cost 2 again/allowed": false,
		"fixed test alice after clear/allowed": true, "fixed stats nobody/remaining": 3,
		"moving stats carol before/remaining": 3, "moving hit carol 3/allowed": true,
		"moving hit carol 4/allowed": false, "moving test carol/allowed": false, "moving stats carol/remaining": 0,
		"stored moving carol/type": "list", "stored moving carol/len": 3, "stored moving carol/all_17g": true,
		"moving hit dave cost 2/allowed": true, "moving hit dave cost 2 again/allowed": false,
		"moving hit dave cost 1/allowed": true, "stored moving dave/len": 3,
		"moving test carol after clear/allowed":     true,
		"fixed hit erin after script flush/allowed": true, "moving hit erin after script flush/allowed": true,
		"storage reset/deleted": 4, "keys after reset/keys": []any{"unrelated"},
	})
	expectRange(t, redisTr, "fixed stats alice/reset_in_s", 58, 60)
	expectRange(t, redisTr, "stored moving carol/pttl_ms", 9000, 10000)
	compareTranscripts(t, redisTr, sluiceTr)
}
