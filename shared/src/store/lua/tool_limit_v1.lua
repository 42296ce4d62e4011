-- tool_limit_v1: learn or drop one provider model's tool limit.
-- KEYS[1] = the limit's hash (limit, until, version)
-- learn: ARGV[1] = 'learn', ARGV[2] = limit, ARGV[3] = ttl ms
--   a lower limit wins with a fresh TTL, the same limit extends, a higher one is ignored
-- drop:  ARGV[1] = 'drop', ARGV[2] = tools of a success: a stored limit below it is removed
-- -> {changed, limit (-1 = none), remaining_ms, version}
-- The deadline is on the Redis clock (TIME); the key expires with it (PEXPIREAT).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'limit', 'until', 'version')
local limit = tonumber(v[1])
local until_ms = tonumber(v[2]) or 0
local version = tonumber(v[3]) or 0
if limit == nil or until_ms <= now then
  limit = nil
  until_ms = 0
end
local n = tonumber(ARGV[2]) or 0
if ARGV[1] == 'drop' then
  if limit ~= nil and limit < n then
    redis.call('DEL', KEYS[1])
    return {1, -1, 0, version + 1}
  end
  return {0, limit or -1, limit and until_ms - now or 0, version}
end
local at = now + (tonumber(ARGV[3]) or 0)
local changed = 0
if limit == nil or n < limit then
  limit = n
  until_ms = at
  changed = 1
elseif n == limit and at > until_ms then
  until_ms = at
  changed = 1
end
if changed == 1 then
  version = version + 1
  redis.call('HSET', KEYS[1], 'limit', limit, 'until', until_ms, 'version', version)
  redis.call('PEXPIREAT', KEYS[1], until_ms)
end
return {changed, limit, until_ms - now, version}
