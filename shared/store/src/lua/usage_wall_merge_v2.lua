-- usage_wall_merge_v2: merge one connection's Claude usage-wall deadlines, extend-only, or end
-- its lane early.
-- KEYS[1] = the connection's usage-wall hash, KEYS[2] = the change log (last key)
-- ARGV[1..5] = time left (ms, 0 = none) of: lane, lane reset, re-acceptance block,
--   spent budget, reset hold; ARGV[6] = 1 when the reset hold is the error back-off;
--   ARGV[7] = '' to merge, or the reason a node ended its lane early (then ARGV[1] is ignored
--   and ARGV[2] is the time left to the ended lane's reset); ARGV[8] = the connection id
-- -> {changed, version, lane_ms, lane_reset_ms, reaccept_ms, budget_ms, reset_hold_ms,
--     reset_backoff, ended, ended_reset_ms}, times left on the Redis clock after the call;
--     `ended` is the reason of the lane's last early end ('' = none since the last lane)
-- Deadlines are absolute on the Redis clock (TIME), never a node's; the key expires with its
-- last deadline (PEXPIREAT), so nothing outlives what it says. v2 over v1: an early end is
-- recorded (`ended`, `ended_reset`: the ended lane's reset) and withdraws the stored lane, the
-- version follows the Redis clock (monotonic across expiry), and every change is appended to
-- the change log (`w` = connection id, `v` = version), so a node that missed the event reads
-- the record at its next resync.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- changelog::CHANGELOG_MAXLEN
local CHANGELOG_MAXLEN = 100000
-- usage_wall::lane::LANE_MARGIN_MS: the lane outlives its reset by this.
local LANE_MARGIN_MS = 60000
-- An end withdraws the stored lane when its reset is not later than the ended one's by more
-- than this: the same lane, adopted with some delay; a later one is a newer lane.
local SAME_LANE_MS = 5000
local f = {'lane', 'lane_reset', 'reaccept', 'budget', 'reset_hold', 'reset_backoff', 'version',
  'ended', 'ended_reset'}
local v = redis.call('HMGET', KEYS[1], unpack(f))
local stored = {}
for i = 1, 5 do
  stored[i] = tonumber(v[i]) or 0
  if stored[i] <= now then stored[i] = 0 end
end
local backoff = tonumber(v[6]) or 0
local version = tonumber(v[7]) or 0
local ended = v[8] or ''
local ended_reset = tonumber(v[9]) or 0
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
local reason = ARGV[7] or ''
if reason ~= '' then
  local reset_at = now + (tonumber(ARGV[2]) or 0)
  if stored[1] > 0 then
    -- A lane whose reset has passed is in its margin: its reset is "now".
    local stored_reset = stored[2] > 0 and stored[2] or math.min(now, stored[1] - LANE_MARGIN_MS)
    if stored_reset <= reset_at + SAME_LANE_MS then
      stored[1] = 0
      stored[2] = 0
      ended = reason
      ended_reset = math.max(stored_reset, reset_at)
      changed = 1
    end
  elseif reset_at + LANE_MARGIN_MS > now and (ended == '' or reset_at > ended_reset) then
    -- Redis never held this lane (its write failed) or it ended already: the end is recorded
    -- for the nodes that hold it from an event.
    ended = reason
    ended_reset = reset_at
    changed = 1
  end
elseif later(1) then
  -- The lane and its reset move together: the later lane brings its own reset, and a new
  -- lane clears the record of an earlier end.
  stored[2] = (tonumber(ARGV[2]) or 0) > 0 and now + tonumber(ARGV[2]) or 0
  ended = ''
  ended_reset = 0
end
later(3)
later(4)
if later(5) then backoff = tonumber(ARGV[6]) or 0 end
-- The record lives as long as its last deadline, an ended lane's included: every node's copy
-- of that lane has lapsed by then.
local last = 0
for i = 1, 5 do
  if stored[i] > last then last = stored[i] end
end
if ended ~= '' and ended_reset + LANE_MARGIN_MS > last then last = ended_reset + LANE_MARGIN_MS end
if changed == 1 then
  version = math.max(version + 1, now * 1000)
  local ver = string.format('%.0f', version)
  redis.call('HSET', KEYS[1], 'lane', stored[1], 'lane_reset', stored[2], 'reaccept', stored[3],
    'budget', stored[4], 'reset_hold', stored[5], 'reset_backoff', backoff, 'version', ver,
    'ended', ended, 'ended_reset', ended_reset)
  redis.call('PEXPIREAT', KEYS[1], math.max(last, now + 1))
  redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', CHANGELOG_MAXLEN, '*', 'w', ARGV[#ARGV], 'v', ver)
end
local out = {changed, version}
for i = 1, 5 do
  out[#out + 1] = stored[i] > now and stored[i] - now or 0
end
out[#out + 1] = backoff
out[#out + 1] = ended
out[#out + 1] = ended_reset > now and ended_reset - now or 0
return out
