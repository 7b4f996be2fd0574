-- @fastify/rate-limit 11.2.0 (npm), store/RedisStore.js: the constant
-- luaRead, the template literal as JavaScript evaluates it (it has no
-- substitutions or escapes: it begins with the newline after the opening
-- backquote, keeps its two-space indents and ends with a newline).
-- RedisStore defines it with ioredis defineCommand ("rateLimitRead", one
-- key); read sends only the key: EVALSHA, and EVAL after NOSCRIPT.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 4c7d9ef62b3d4f8efd8d11d5d2fd1a56b1e723bc).
-- sluice-bench: end of header

  -- Key to operate on
  local key = KEYS[1]

  -- Read the counter without mutating it
  local current = redis.call('GET', key)

  -- A missing key returns false from redis.call (and nil from redis.pcall);
  -- "not current" covers both, so the clean-state branch is robust either way.
  if not current then
    -- Key doesn't exist: clean state
    return {0, 0}
  end

  -- Read the remaining TTL in milliseconds
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- -2 (no key) or -1 (no expiry): report no active window
    ttl = 0
  end

  return {tonumber(current), ttl}
