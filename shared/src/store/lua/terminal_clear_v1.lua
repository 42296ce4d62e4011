-- terminal_clear_v1: operator reinstate. The connection starts afresh (no cooldown, level 0).
-- KEYS[1] = connection hash -> 1 was terminal | 0 was not (nothing changed)
local cur = redis.call('HGET', KEYS[1], 'terminal')
if not cur or cur == '' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
