-- lockout_read_v1: read a connection's lockouts and prune index members whose key expired.
-- KEYS[1] = index set, KEYS[2..n] = lockout hashes; ARGV[i] = the index member of KEYS[i+1]
-- -> {{member, remaining_ms, count, reason}, ...} for live lockouts only
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 2, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'until', 'count', 'reason')
  local until_ms = tonumber(v[1])
  if until_ms and until_ms > now then
    out[#out + 1] = {ARGV[i - 1], until_ms - now, tonumber(v[2]) or 0, v[3] or ''}
  else
    -- Checked and removed in one script, so a concurrent extend cannot lose its member.
    redis.call('SREM', KEYS[1], ARGV[i - 1])
  end
end
return out
