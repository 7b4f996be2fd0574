-- ulule/limiter v3.11.2 (Go module github.com/ulule/limiter/v3),
-- drivers/store/redis/store.go: the raw string constant luaIncrScript as Go
-- reads it (it begins with the newline after the opening backquote and ends
-- with a newline; its indents are tabs). NewStoreWithOptions SCRIPT LOADs it
-- (and luaPeekScript) when the store is made; Get and Increment send EVALSHA
-- with the count and the period in milliseconds (go-redis writes both as
-- integers) and, on NOSCRIPT, load both scripts again and repeat the EVALSHA.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 f74233f556d3f99c50b61169cf8aa8d5deb63fb2).
-- sluice-bench: end of header

local key = KEYS[1]
local count = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local ret = redis.call("incrby", key, ARGV[1])
if ret == count then
	if ttl > 0 then
		redis.call("pexpire", key, ARGV[2])
	end
	return {ret, ttl}
end
ttl = redis.call("pttl", key)
return {ret, ttl}
