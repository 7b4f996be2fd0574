-- rate-limit-redis 6.0.1 (npm), dist/index.cjs: scripts.increment, after its
-- .replaceAll(/^\s+/gm, "").trim() (leading whitespace and blank lines gone,
-- trailing spaces kept, no final newline). RedisStore.init SCRIPT LOADs it
-- (and scripts.get); increment sends EVALSHA, and on NOSCRIPT SCRIPT LOAD then
-- EVALSHA again.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 895b92e1712734e1b464999be23953485475357b).
-- sluice-bench: end of header
local windowMs = tonumber(ARGV[1])
local timeToExpire = redis.call("PTTL", KEYS[1])
if timeToExpire <= 0 then
redis.call("SET", KEYS[1], 1, "PX", windowMs)
return { 1, windowMs }
end
local totalHits = redis.call("INCR", KEYS[1])        
return { totalHits, timeToExpire }