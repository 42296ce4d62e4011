-- lockout_decay_v3: a success halves the failure count; at 0 the lockout is removed.
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = lockout hash, KEYS[2] = index set, KEYS[3] = connection hash; ARGV[1] = index member
-- -> {new count (-1 = none), version}
local count = tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
if count <= 0 then
  return {-1, version(KEYS[3])}
end
local decayed = math.floor(count / 2)
if decayed == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], 'count', decayed)
end
local ver = bump(KEYS[3])
retain(KEYS[3], now)
return {decayed, ver}
