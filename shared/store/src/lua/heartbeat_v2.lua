-- heartbeat_v2: one node's heartbeat and the membership it sees, in one call.
-- KEYS[1] = the node's heartbeat key, KEYS[2] = the node set, KEYS[3] = the last-seen index
--   (sorted set, member node id, score = when its heartbeat expires, Redis clock)
-- ARGV[1] = node id, ARGV[2] = heartbeat JSON, ARGV[3] = ttl ms
-- -> {live, untracked, dead ids...}: `live` counts the nodes of the index whose heartbeat has
--    not expired, `dead` lists the ones whose heartbeat has, and `untracked` counts members of
--    the node set the index does not know (nodes of an older release, which write only their
--    key and the set): the caller then reads their keys instead (store::membership).
-- The key and the set are written as before, so the coordinator's view (SMEMBERS + MGET) and
-- nodes of an older release keep working. A round costs a constant number of commands,
-- whatever the cluster's size (v1: one GET per member of the set).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = math.max(tonumber(ARGV[3]) or 1, 1)
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
local live = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local members = redis.call('SCARD', KEYS[2])
local tracked = redis.call('ZINTERCARD', 2, KEYS[2], KEYS[3])
local out = {live, members - tracked}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  out[#out + 1] = id
end
return out
