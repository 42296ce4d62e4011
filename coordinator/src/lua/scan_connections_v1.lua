-- scan_connections_v1: one pass over many connections, returning only those worth showing.
-- ARGV[1..6] = (head, tail) of the connection hash, lockout index and lease key names around
-- the connection id (from KeySpace), ARGV[7..] = connection ids.
-- -> {now_ms, {id, until, level, reason, terminal, lockout_count, leased}, ...} for every
--    connection with a cooldown hash, a lockout or a lease; clean ones are left out.
-- Read-only. It touches keys of many hash slots, so it needs a single Redis (not Cluster).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
for i = 7, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', ARGV[1] .. id .. ARGV[2], 'until', 'level', 'reason', 'terminal')
  local locks = redis.call('SCARD', ARGV[3] .. id .. ARGV[4])
  local leased = redis.call('EXISTS', ARGV[5] .. id .. ARGV[6])
  if h[1] or h[2] or h[4] or locks > 0 or leased > 0 then
    out[#out + 1] = {id, h[1] or '0', h[2] or '0', h[3] or '', h[4] or '', locks, leased}
  end
end
return out
