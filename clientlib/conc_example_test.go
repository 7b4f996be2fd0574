package clientlib_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clientlib"
)

// At most two exports run at once, cluster-wide. A holder that crashes
// without releasing frees its slot when its lease ends; one that runs long
// renews its lease.
func ExampleLimiter_Acquire() {
	rdb, stop := exampleServer()
	defer stop()
	l := clientlib.NewLimiter(rdb)
	ctx := context.Background()

	var held []*clientlib.Lease
	for range 3 {
		lease, ok, err := l.Acquire(ctx, "exports", 2, 30*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if !ok {
			fmt.Printf("busy: %d running, a slot frees within %v\n", lease.Holders, lease.NextExpiry)
			continue
		}
		fmt.Printf("running, %d of 2 slots taken\n", lease.Holders)
		held = append(held, lease)
	}
	if ok, err := held[0].Renew(ctx, time.Minute); err == nil && ok {
		fmt.Println("renewed for a minute")
	}
	for _, lease := range held {
		lease.Release()
	}
	_, ok, _ := l.Acquire(ctx, "exports", 2, 30*time.Second)
	fmt.Println("after the releases:", ok)
	// Output:
	// running, 1 of 2 slots taken
	// running, 2 of 2 slots taken
	// busy: 2 running, a slot frees within 30s
	// renewed for a minute
	// after the releases: true
}
