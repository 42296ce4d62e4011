-- breaker_probe_release_v1: hands back a half-open probe lease that never reached upstream (no
-- outcome will come), so another node may probe now instead of after the lease's TTL. Fenced:
-- only the holder of generation ARGV[1] releases; a lease that expired or was replaced stays.
-- KEYS[1] = probe hash {owner, gen}. ARGV: generation, owner -> 1 released | 0 not held
local cur = redis.call('HMGET', KEYS[1], 'gen', 'owner')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
