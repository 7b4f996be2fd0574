package clientlib_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// exampleServer starts an in-process Sluice server with its clock frozen,
// so that the examples' output does not depend on how fast they run. A real
// application points its go-redis client at a running sluice-server.
func exampleServer() (rdb *redis.Client, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := sluicetest.Serve(ln, sluicetest.Options{})
	rdb = redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	ctx := context.Background()
	now, err := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Int64()
	if err == nil {
		err = rdb.Do(ctx, "DEBUG", "CLOCK", "SET", now+1000).Err()
	}
	if err != nil {
		panic(err)
	}
	return rdb, func() { rdb.Close(); s.Close() }
}

func Example() {
	rdb, stop := exampleServer()
	defer stop()
	l := clientlib.NewLimiter(rdb)
	ctx := context.Background()

	// One request per second on average, bursts of up to three.
	limit := clientlib.GCRA(1, time.Second, 3)
	for range 4 {
		res, err := l.Allow(ctx, "user:42", limit)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if res.Allowed {
			fmt.Printf("allowed, %d left, full again in %v\n", res.Remaining, res.ResetAfter)
		} else {
			fmt.Printf("limited, retry in %v\n", res.RetryAfter)
		}
	}
	// Output:
	// allowed, 2 left, full again in 1s
	// allowed, 1 left, full again in 2s
	// allowed, 0 left, full again in 3s
	// limited, retry in 1s
}

func ExampleLimiter_All() {
	rdb, stop := exampleServer()
	defer stop()
	l := clientlib.NewLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailClosed))
	ctx := context.Background()

	// A login is charged to the account and to the client address, or to
	// neither: an address that is refused does not use up the account's
	// attempts.
	account := clientlib.SlidingLog(5, 15*time.Minute)
	address := clientlib.SlidingWindow(2, time.Minute)
	for range 3 {
		res, err := l.All(ctx,
			clientlib.Request{Key: "login:acct:ann", Limit: account, Cost: 1},
			clientlib.Request{Key: "login:ip:198.51.100.7", Limit: address, Cost: 1})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("allowed=%v refused-by=%d account-left=%d address-left=%d\n",
			res.Allowed, res.Index, res.Results[0].Remaining, res.Results[1].Remaining)
	}
	info, _ := l.Info(ctx, "login:acct:ann")
	fmt.Println("account attempts left:", info.Remaining)
	// Output:
	// allowed=true refused-by=-1 account-left=4 address-left=1
	// allowed=true refused-by=-1 account-left=3 address-left=0
	// allowed=false refused-by=1 account-left=2 address-left=0
	// account attempts left: 3
}

func ExampleLimiter_Refund() {
	rdb, stop := exampleServer()
	defer stop()
	l := clientlib.NewLimiter(rdb)
	ctx := context.Background()

	quota := clientlib.FixedWindow(1000, time.Hour)
	res, _ := l.AllowN(ctx, "export:acme", quota, 100)
	fmt.Println("reserved 100, left:", res.Remaining)
	// The job turned out to need only 30 units: give 70 back.
	left, ok, _ := l.Refund(ctx, "export:acme", 70)
	fmt.Println("after refund:", left, ok)
	_, ok, _ = l.Refund(ctx, "export:nobody", 70)
	fmt.Println("refund without state:", ok)
	// Output:
	// reserved 100, left: 900
	// after refund: 970 true
	// refund without state: false
}

func ExampleWithFailurePolicy() {
	rdb, stop := exampleServer()
	closed := clientlib.NewLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailClosed),
		clientlib.WithAlarm(func(a clientlib.Alarm) { fmt.Println("alarm active:", a.Active) }))
	open := clientlib.NewLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailOpen))
	ctx := context.Background()
	stop() // the server goes away

	login, _ := closed.Allow(ctx, "login:ann", clientlib.PerMinute(5))
	fmt.Println("login:", login.Allowed, login.Source)
	api, _ := open.Allow(ctx, "api:acme", clientlib.PerSecond(100))
	fmt.Println("paid API:", api.Allowed, api.Source)
	// Output:
	// alarm active: true
	// login: false fail-closed
	// paid API: true fail-open
}

func ExampleMiddleware() {
	rdb, stop := exampleServer()
	defer stop()
	l := clientlib.NewLimiter(rdb)
	api := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Rules: []clientlib.Rule{
			{Name: "key", Limit: clientlib.PerMinute(100), Key: clientlib.KeyByHeader("X-Api-Key")},
			{Name: "burst", Limit: clientlib.GCRA(2, time.Second, 2)},
		},
		FreeStatuses: []int{http.StatusNotModified},
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", "k1")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s", w.Code, w.Header().Get("RateLimit"))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Printf(" Retry-After: %s", ra)
		}
		fmt.Println()
	}
	// Output:
	// 200 RateLimit: "key";r=99;t=1, "burst";r=1;t=1
	// 200 RateLimit: "key";r=98;t=2, "burst";r=0;t=1
	// 429 RateLimit: "key";r=97;t=2, "burst";r=0;t=1 Retry-After: 1
}
