-- janitor_pass_v1: the leader's fenced janitor write.
-- KEYS[1] = leader lease hash, KEYS[2] = node set, KEYS[3] = janitor log (list),
-- KEYS[4 .. 3+n] = heartbeat keys of the n candidate nodes,
-- KEYS[4+n ..] = pairs (permit expiry zset, permit grants hash) of every connection.
-- ARGV[1] = generation, ARGV[2] = coordinator id, ARGV[3] = n, ARGV[4 .. 3+n] = node ids.
-- -> -1 when fenced (the lease does not carry this generation), else {nodes_pruned, permits_freed}.
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
  return -1
end
local n = tonumber(ARGV[3])
local pruned = 0
local freed = 0
for i = 1, n do
  local id = ARGV[3 + i]
  -- A node that heartbeated again since the read keeps its record.
  if redis.call('EXISTS', KEYS[3 + i]) == 0 then
    pruned = pruned + redis.call('SREM', KEYS[2], id)
    for j = 4 + n, #KEYS - 1, 2 do
      freed = freed + redis.call('ZREM', KEYS[j], id)
      redis.call('HDEL', KEYS[j + 1], id)
    end
  end
end
local t = redis.call('TIME')
redis.call('LPUSH', KEYS[3], 'gen=' .. ARGV[1] .. ' by=' .. ARGV[2] .. ' at=' .. t[1] ..
  ' pruned=' .. pruned .. ' permits=' .. freed)
redis.call('LTRIM', KEYS[3], 0, 49)
return {pruned, freed}
