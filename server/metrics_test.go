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
	rec := httptest.NewRecorder()
	ts.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sluice_decisions_total{outcome="allowed"} 1`,
		`sluice_decisions_total{outcome="limited"} 1`,
		"sluice_keys 1",
		"sluice_used_memory_bytes ",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
}
