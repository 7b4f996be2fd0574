-- rate-limit-redis 6.0.1 (npm), dist/index.cjs: scripts.get, after its
-- .replaceAll(/^\s+/gm, "").trim() (leading whitespace and blank lines gone,
-- no final newline). RedisStore.init SCRIPT LOADs it beside
-- scripts.increment; RedisStore.get sends EVALSHA with the key alone and, on
-- NOSCRIPT, SCRIPT LOAD then EVALSHA again. sluice-bench loads it the same
-- way and never runs it.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a).
-- sluice-bench: end of header
local totalHits = redis.call("GET", KEYS[1])
local timeToExpire = redis.call("PTTL", KEYS[1])
return { totalHits, timeToExpire }