-- Fence check before a guarded side effect (dispatch on a leased connection).
-- KEYS[1] = lease hash   ARGV[1] = owner hash   ARGV[2] = generation   ARGV[3] = api key id
-- Returns 1 when the caller holds the live lease with that generation for that key id, else 0.
local v = redis.call('HMGET', KEYS[1], 'owner', 'gen', 'key')
if v[1] == ARGV[1] and v[2] == ARGV[2] and v[3] == ARGV[3] then
  return 1
end
return 0
