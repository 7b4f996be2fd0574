// Command redisrate captures what go-redis/redis_rate sends: Allow with
// PerSecond(100) twice on a fresh connection and an empty script cache,
// then once more after SCRIPT FLUSH. Usage: redisrate PROXY_ADDR SOCK
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Network: "unix", Addr: os.Args[2]})
	defer admin.Close()
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Args[1], PoolSize: 1})
	defer rdb.Close()
	lim := redis_rate.NewLimiter(rdb)
	const key = "sluice-bench:redis-rate:0"
	for i := range 3 {
		if i == 2 {
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				panic(err)
			}
		}
		res, err := lim.Allow(ctx, key, redis_rate.PerSecond(100))
		fmt.Printf("%+v %v\n", res, err)
	}
}
