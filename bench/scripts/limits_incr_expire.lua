-- limits 2.8.0 (Python; Debian's python3-limits 2.8.0-1), the file
-- limits/resources/redis/lua_scripts/incr_expire.lua as installed
-- (/usr/lib/python3/dist-packages), byte for byte, its final newline
-- included. limits/storage/redis.py reads it as bytes (get_package_data:
-- pkg_resources.resource_string) and RedisStorage registers it with
-- redis-py's register_script (python3-redis 4.3.4). RedisStorage.incr
-- (FixedWindowRateLimiter.hit, unless elastic_expiry), with ARGV expiry and
-- amount,
-- sends EVALSHA of these bytes' SHA1; on NOSCRIPT, redis-py sends SCRIPT
-- LOAD of the text, then the EVALSHA again. It never sends EVAL.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 628bd136a573a06b346879695681af12ccef300f).
-- sluice-bench: end of header
local current
local amount = tonumber(ARGV[2])
current = redis.call("incrby", KEYS[1], amount)

if tonumber(current) == amount then
    redis.call("expire", KEYS[1], ARGV[1])
end

return current
