-- limits 2.8.0 (Python; Debian's python3-limits 2.8.0-1), the file
-- limits/resources/redis/lua_scripts/acquire_moving_window.lua as installed
-- (/usr/lib/python3/dist-packages), byte for byte, its final newline
-- included. limits/storage/redis.py reads it as bytes (get_package_data:
-- pkg_resources.resource_string) and RedisStorage registers it with
-- redis-py's register_script (python3-redis 4.3.4). acquire_entry
-- (MovingWindowRateLimiter.hit), with ARGV time.time() (a float, which
-- redis-py writes as repr does), limit, expiry and amount,
-- sends EVALSHA of these bytes' SHA1; on NOSCRIPT, redis-py sends SCRIPT
-- LOAD of the text, then the EVALSHA again. It never sends EVAL.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 d19f37c18768a509dbf1310a257bfc35be65609f).
-- sluice-bench: end of header
local amount = tonumber(ARGV[4])
local entry = redis.call('lindex', KEYS[1], tonumber(ARGV[2]) - amount)
local timestamp = tonumber(ARGV[1])
local expiry = tonumber(ARGV[3])

if entry and tonumber(entry) >= timestamp - expiry then
    return false
end
local limit = tonumber(ARGV[2])
local entries= {}
for i=1, amount do
    entries[i] = timestamp
end
redis.call('lpush', KEYS[1], unpack(entries))
redis.call('ltrim', KEYS[1], 0, limit - 1)
redis.call('expire', KEYS[1], expiry)

return true
