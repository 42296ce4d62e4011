-- lockout_compact_v1: the leader's fenced compaction of one lockout index.
-- KEYS[1] = leader lease hash, KEYS[2] = the connection's lockout index,
-- KEYS[3 ..] = lockout hashes; ARGV[1] = generation, ARGV[i+1] = index member of KEYS[i+2].
-- -> -1 when fenced, else the number of members removed (their lockout had expired).
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
  return -1
end
local removed = 0
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    removed = removed + redis.call('SREM', KEYS[2], ARGV[i - 1])
  end
end
return removed
