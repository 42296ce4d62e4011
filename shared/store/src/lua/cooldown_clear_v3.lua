-- cooldown_clear_v3: operator clear of cooldown and backoff level; never clears a terminal.
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = connection hash -> {1 cleared | 0 terminal, version}
local terminal = redis.call('HGET', KEYS[1], 'terminal')
if terminal and terminal ~= '' then
  return {0, version(KEYS[1])}
end
local cur = redis.call('HMGET', KEYS[1], 'until', 'level')
if not cur[1] and not cur[2] then
  -- Nothing to clear: no version bump, so an idle connection costs its peers nothing.
  return {1, version(KEYS[1])}
end
redis.call('HDEL', KEYS[1], 'until', 'level', 'reason', 'err', 'at')
local ver = bump(KEYS[1])
retain(KEYS[1], now)
return {1, ver}
