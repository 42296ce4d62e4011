-- Fenced lease release: a late release can never delete someone else's lease.
-- The fence counter is left alone, so the next grant gets a higher generation.
-- KEYS[1] = lease hash   ARGV[1] = owner hash   ARGV[2] = generation
-- Returns 1 when released, 0 when the caller no longer held it.
local v = redis.call('HMGET', KEYS[1], 'owner', 'gen')
if v[1] == ARGV[1] and v[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
