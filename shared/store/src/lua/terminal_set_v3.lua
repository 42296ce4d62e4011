-- terminal_set_v3: mark a connection terminal (sticky, no TTL).
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = connection hash; ARGV[1] = status -> {1 changed | 0 already that status, version}
local cur = redis.call('HGET', KEYS[1], 'terminal')
if cur == ARGV[1] then
  return {0, version(KEYS[1])}
end
redis.call('HSET', KEYS[1], 'terminal', ARGV[1])
local ver = bump(KEYS[1])
redis.call('PERSIST', KEYS[1])
return {1, ver}
