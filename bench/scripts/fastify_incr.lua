-- @fastify/rate-limit 11.2.0 (npm), store/RedisStore.js: the constant lua,
-- the template literal as JavaScript evaluates it (it has no substitutions
-- or escapes: it begins with the newline after the opening backquote, keeps
-- its two-space indents and ends with a newline). RedisStore defines it
-- with ioredis defineCommand ("rateLimit", one key); incr sends the key, the
-- time window in milliseconds, max, continueExceeding and
-- exponentialBackoff ("true"/"false"): EVALSHA, and EVAL after NOSCRIPT.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 b8a19d47785922bb04e7a9fdb49e90d89be1b8af).
-- sluice-bench: end of header

  -- Key to operate on
  local key = KEYS[1]
  -- Time window for the TTL
  local timeWindow = tonumber(ARGV[1])
  -- Max requests
  local max = tonumber(ARGV[2])
  -- Flag to determine if TTL should be reset after exceeding
  local continueExceeding = ARGV[3] == 'true'
  --Flag to determine if exponential backoff should be applied
  local exponentialBackoff = ARGV[4] == 'true'

  --Max safe integer
  local MAX_SAFE_INTEGER = (2^53) - 1

  -- Increment the key's value
  local current = redis.call('INCR', key)

  if current == 1 or (continueExceeding and current > max) then
    redis.call('PEXPIRE', key, timeWindow)
  elseif exponentialBackoff and current > max then
    local backoffExponent = current - max - 1
    timeWindow = math.min(timeWindow * (2 ^ backoffExponent), MAX_SAFE_INTEGER)
    redis.call('PEXPIRE', key, timeWindow)
  else
    timeWindow = redis.call('PTTL', key)
  end

  return {current, timeWindow}
