-- rate-limiter-flexible 11.4.0 (npm), lib/RateLimiterRedis.js: incrTtlLuaScript,
-- the template literal as JavaScript evaluates it (its backslash-newlines are
-- line continuations, so the script is one line, ending in a space, with no
-- newline). RateLimiterRedis.consume runs it through ioredis defineCommand
-- ("rlflxIncr"): eval on a connection's first call, evalsha after, eval again
-- after NOSCRIPT.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 a1de965f42e177aa339706bd580f049065eca79a).
-- sluice-bench: end of header
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') local consumed = redis.call('incrby', KEYS[1], ARGV[1]) local ttl = redis.call('pttl', KEYS[1]) if ttl == -1 then   redis.call('expire', KEYS[1], ARGV[2])   ttl = 1000 * ARGV[2] end return {consumed, ttl} 