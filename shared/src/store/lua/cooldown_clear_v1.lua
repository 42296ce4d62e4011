-- cooldown_clear_v1: operator clear of cooldown and backoff level; never clears a terminal.
-- KEYS[1] = connection hash -> 1 cleared | 0 terminal
local terminal = redis.call('HGET', KEYS[1], 'terminal')
if terminal and terminal ~= '' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
