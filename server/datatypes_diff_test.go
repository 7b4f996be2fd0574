package server_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// readyFamilies are the difftest families whose commands Sluice has;
// SLUICE_DIFF_FAMILIES overrides the list.
var readyFamilies = []string{"strings", "tx", "hash", "set"}

// diffSettings reads the differential run's size, seed and families from
// the environment: SLUICE_DIFF_STEPS (default 3000 per protocol),
// SLUICE_DIFF_SEED, SLUICE_DIFF_FAMILIES (comma-separated; default all).
func diffSettings() (steps int, seed uint64, families []string) {
	steps, seed = 3000, 20261201
	if n, err := strconv.Atoi(os.Getenv("SLUICE_DIFF_STEPS")); err == nil && n > 0 {
		steps = n
	}
	if n, err := strconv.ParseUint(os.Getenv("SLUICE_DIFF_SEED"), 10, 64); err == nil {
		seed = n
	}
	families = readyFamilies
	if f := os.Getenv("SLUICE_DIFF_FAMILIES"); f != "" {
		families = strings.Split(f, ",")
	}
	return steps, seed, families
}

// Every data type and transactions, mixed over one key pool, sent to
// Sluice and to redis-server: each reply byte for byte (RESP2, then
// RESP3), then the whole final state read back from both.
func TestDataTypesMatchRedis(t *testing.T) { protocols(t, testDataTypes) }

func testDataTypes(t *testing.T, resp3 bool) {
	steps, seed, families := diffSettings()
	if len(families) == 0 {
		t.Skip("no data-type family is ready yet")
	}
	ts := sluicetest.Start(t, sluicetest.Options{})
	r := sluicetest.StartRedis(t, "--databases", "1")
	p := difftest.NewPair(t, ts.Addr, r)
	if resp3 {
		p.Hello3()
		seed++
	}
	p.Run(difftest.NewGen(seed), steps, families...)
	difftest.Compare(t, "final state", difftest.Dump(t, "tcp", ts.Addr), difftest.Dump(t, r.Network, r.Addr), 1)
	t.Log(p.CountsLine())
}
