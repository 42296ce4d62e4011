-- Fenced lease acquire.
-- KEYS[1] = lease hash {owner, gen, key}   KEYS[2] = fence counter (never expires, never reset)
-- ARGV[1] = owner hash (SHA-256 hex of the token)   ARGV[2] = api key id   ARGV[3] = ttl ms
-- Returns {1, generation, ttl_ms} when granted (a re-acquire by the same owner and key id
-- renews and keeps its generation), or {0, generation, pttl_ms} when someone else holds it.
--
-- v2: a new generation is the counter plus one, raised to the server clock in microseconds
-- when that is higher. Why: a Sentinel failover can lose the last writes, the counter's
-- included, since replication is asynchronous. The promoted master then issues from its own
-- clock, which is past every generation the old master issued before the failover began
-- (those were at most the old master's clock then, as grants on one lease come far less
-- often than one per microsecond), so generations never go back across a failover.
-- Microseconds stay below 2^53 (exact in JSON clients and in Lua doubles) until 2255.
local ttl = tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'owner', 'gen', 'key')
if not v[1] then
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local gen = redis.call('INCR', KEYS[2])
  if gen < now_us then
    gen = now_us
    redis.call('SET', KEYS[2], string.format('%.0f', gen))
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'gen', string.format('%.0f', gen), 'key', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, gen, ttl}
end
local gen = tonumber(v[2]) or 0
if v[1] == ARGV[1] and v[3] == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, gen, ttl}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 1 then pttl = 1 end
return {0, gen, pttl}
