-- Moves a live lease to another connection with the same generation (the leased connection
-- became ineligible). One step, so no moment exists where both or neither connection holds it.
-- KEYS[1] = source lease hash   KEYS[2] = target lease hash   KEYS[3] = target fence counter
-- ARGV[1] = owner hash   ARGV[2] = generation   ARGV[3] = api key id
-- Returns {1, generation, pttl_ms} when moved (the lease keeps its remaining time),
-- {0, 0, 0} when the caller no longer holds the source lease (stale), or
-- {-1, 0, pttl_ms} when the target is held by another lease.
-- The target's counter is raised to the generation, so a later grant there is higher still.
local v = redis.call('HMGET', KEYS[1], 'owner', 'gen', 'key')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] or v[3] ~= ARGV[3] then
  return {0, 0, 0}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then
  return {0, 0, 0}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl < 1 then pttl = 1 end
  return {-1, 0, pttl}
end
local counter = tonumber(redis.call('GET', KEYS[3])) or 0
if counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[3], ARGV[2])
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'gen', ARGV[2], 'key', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ttl)
return {1, tonumber(ARGV[2]), ttl}
