-- Fenced lease renew: only the current owner with the current generation extends it.
-- KEYS[1] = lease hash   ARGV[1] = owner hash   ARGV[2] = generation   ARGV[3] = ttl ms
-- Returns 1 when renewed, 0 when the lease is lost (expired, released, revoked or re-granted).
local v = redis.call('HMGET', KEYS[1], 'owner', 'gen')
if v[1] == ARGV[1] and v[2] == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end
return 0
