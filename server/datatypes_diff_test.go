package server_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Every data type and transactions, mixed over one key pool, sent to
// Sluice and to redis-server: each reply byte for byte (RESP2, then
// RESP3), then the whole final state read back from both. The size, seed
// and families come from SLUICE_DIFF_* (see difftest.Settings).
func TestDataTypesMatchRedis(t *testing.T) { protocols(t, testDataTypes) }

func testDataTypes(t *testing.T, resp3 bool) {
	steps, seed, families := difftest.Settings(6000)
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
