-- tool_limit_v2: learn or drop one provider model's tool limit.
-- KEYS[1] = the limit's hash (limit, until, version, dropped), KEYS[2] = the index of limits
--   (sorted set, member provider\x1fmodel, score = the record's expiry), KEYS[3] = the change
--   log (last key)
-- learn: ARGV[1] = 'learn', ARGV[2] = limit, ARGV[3] = ttl ms
--   a lower limit wins with a fresh TTL, the same limit extends, a higher one is ignored
-- drop:  ARGV[1] = 'drop', ARGV[2] = tools of a success: a stored limit below it is removed
-- ARGV[4] = the index member (last argument)
-- -> {changed, limit (-1 = none), remaining_ms, version}
-- The deadline is on the Redis clock (TIME); the key expires with it (PEXPIREAT). v2 over v1:
-- a drop keeps the hash as a tombstone {version, dropped = tools} until the dropped limit's
-- own expiry (every node's copy of it lapses by then), the version follows the Redis clock,
-- every change is appended to the change log (`t` = provider\x1fmodel, `v` = version), and the
-- index lets a node's full resync find every record without SCAN.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- changelog::CHANGELOG_MAXLEN
local CHANGELOG_MAXLEN = 100000
local member = ARGV[#ARGV]
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local v = redis.call('HMGET', KEYS[1], 'limit', 'until', 'version')
local limit = tonumber(v[1])
local until_ms = tonumber(v[2]) or 0
local version = tonumber(v[3]) or 0
if limit == nil or until_ms <= now then
  limit = nil
end
local function bump()
  version = math.max(version + 1, now * 1000)
  local ver = string.format('%.0f', version)
  redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', CHANGELOG_MAXLEN, '*', 't', member, 'v', ver)
  return ver
end
local n = tonumber(ARGV[2]) or 0
if ARGV[1] == 'drop' then
  if limit ~= nil and limit < n then
    local ver = bump()
    redis.call('HDEL', KEYS[1], 'limit')
    redis.call('HSET', KEYS[1], 'version', ver, 'dropped', n)
    return {1, -1, 0, version}
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
  local ver = bump()
  redis.call('HSET', KEYS[1], 'limit', limit, 'until', until_ms, 'version', ver)
  redis.call('HDEL', KEYS[1], 'dropped')
  redis.call('PEXPIREAT', KEYS[1], until_ms)
  redis.call('ZADD', KEYS[2], until_ms, member)
end
return {changed, limit, until_ms - now, version}
