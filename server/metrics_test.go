package server_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

func TestMetricsHandler(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	ts.Do(t, "CL.THROTTLE", "m", "0", "1", "60")
	ts.Do(t, "CL.THROTTLE", "m", "0", "1", "60")
	ts.Do(t, "CL.THROTTLE", "r", "0", "1", "60", "1", "REQID", "x")
	ts.Do(t, "CL.THROTTLE", "r", "0", "1", "60", "1", "REQID", "x")
	ts.Do(t, "CONC.ACQUIRE", "c", "1", "60")
	ts.Do(t, "CONC.ACQUIRE", "c", "1", "60")
	ts.Do(t, "LB.RESERVE", "s", "10", "1", "1", "1", "MAXWAIT", "0")
	ts.Do(t, "LB.RESERVE", "s", "10", "1", "1", "1", "MAXWAIT", "0")
	// A failed AUTH, on a connection of its own.
	sluicetest.DialRaw(t, "tcp", ts.Addr).Do(t, "AUTH", "nobody", "wrong")
	rec := httptest.NewRecorder()
	ts.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		// Two CL.THROTTLEs and two LB.RESERVEs, one of each refused; the
		// REQID retry is not a decision again.
		`sluice_decisions_total{outcome="allowed"} 3`,
		`sluice_decisions_total{outcome="limited"} 2`,
		"sluice_reqid_retries_answered_total 1",
		`sluice_leases_total{outcome="acquired"} 1`,
		`sluice_leases_total{outcome="refused"} 1`,
		"sluice_keys 4",
		"sluice_auth_failures_total 1",
		"sluice_used_memory_bytes ",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
}
