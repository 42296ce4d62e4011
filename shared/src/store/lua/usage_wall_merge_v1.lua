-- usage_wall_merge_v1: merge one connection's Claude usage-wall deadlines, extend-only.
-- KEYS[1] = the connection's usage-wall hash
-- ARGV[1..5] = time left (ms, 0 = none) of: lane, lane reset, re-acceptance block,
--   spent budget, reset hold; ARGV[6] = 1 when the reset hold is the error back-off
-- -> {changed, version, lane_ms, lane_reset_ms, reaccept_ms, budget_ms, reset_hold_ms,
--     reset_backoff}, times left on the Redis clock after the merge
-- Deadlines are absolute on the Redis clock (TIME), never a node's; the key expires with
-- its last deadline (PEXPIREAT), so nothing outlives what it says.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = {'lane', 'lane_reset', 'reaccept', 'budget', 'reset_hold', 'reset_backoff', 'version'}
local v = redis.call('HMGET', KEYS[1], unpack(f))
local stored = {}
for i = 1, 5 do
  stored[i] = tonumber(v[i]) or 0
  if stored[i] <= now then stored[i] = 0 end
end
local backoff = tonumber(v[6]) or 0
local version = tonumber(v[7]) or 0
local changed = 0
local function later(i)
  local left = tonumber(ARGV[i]) or 0
  if left <= 0 then return false end
  local at = now + left
  if at > stored[i] then
    stored[i] = at
    changed = 1
    return true
  end
  return false
end
-- The lane and its reset move together: the later lane brings its own reset.
if later(1) then stored[2] = (tonumber(ARGV[2]) or 0) > 0 and now + tonumber(ARGV[2]) or 0 end
later(3)
later(4)
if later(5) then backoff = tonumber(ARGV[6]) or 0 end
local last = 0
for i = 1, 5 do
  if stored[i] > last then last = stored[i] end
end
if changed == 1 then
  version = version + 1
  redis.call('HSET', KEYS[1], 'lane', stored[1], 'lane_reset', stored[2], 'reaccept', stored[3],
    'budget', stored[4], 'reset_hold', stored[5], 'reset_backoff', backoff, 'version', version)
  redis.call('PEXPIREAT', KEYS[1], last)
end
local out = {changed, version}
for i = 1, 5 do
  out[#out + 1] = stored[i] > now and stored[i] - now or 0
end
out[#out + 1] = backoff
return out
