-- Fenced delete for a lease holder (the coordinator's janitor): deletes the victims only while
-- the lease still carries the caller's generation, so a deposed leader cannot delete anything.
-- KEYS[1] = lease hash   KEYS[2..] = keys to delete   ARGV[1] = generation
-- Returns the number of keys deleted (>= 0), or -1 when fenced (stale generation).
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
  return -1
end
local n = 0
for i = 2, #KEYS do
  n = n + redis.call('DEL', KEYS[i])
end
return n
