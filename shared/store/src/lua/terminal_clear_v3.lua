-- terminal_clear_v3: operator reinstate. The connection starts afresh (no cooldown, level 0);
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- the hash stays as a tombstone carrying the bumped version, and `reinstated` keeps that
-- version: a node lowers a terminal status it holds only for a reinstatement newer than the
-- record it adopted, never because a record re-created after Redis lost data lacks it.
-- KEYS[1] = connection hash -> {1 was terminal | 0 was not (nothing changed), version}
local cur = redis.call('HGET', KEYS[1], 'terminal')
if not cur or cur == '' then
  return {0, version(KEYS[1])}
end
redis.call('HDEL', KEYS[1], 'until', 'level', 'reason', 'err', 'at', 'terminal')
local ver = bump(KEYS[1])
redis.call('HSET', KEYS[1], 'reinstated', string.format('%.0f', ver))
retain(KEYS[1], now)
return {1, ver}
