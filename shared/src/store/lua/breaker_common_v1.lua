-- breaker_common_v1: prelude shared by the breaker scripts (prepended at build time).
-- Breaker hash {phase, gen, cycles, open_until, window, seq}; failures ZSET (score = Redis ms);
-- probe hash {owner, gen} with PX. Replies: {before, phase, gen, failures, retry_after_ms, cycles}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function snapshot(bkey, fkey, pkey)
  local h = redis.call('HMGET', bkey, 'phase', 'gen', 'cycles', 'open_until', 'window')
  local s = {
    phase = h[1] or 'closed',
    gen = tonumber(h[2]) or 0,
    cycles = tonumber(h[3]) or 0,
    open_until = tonumber(h[4]) or 0,
    window = tonumber(h[5]) or 0,
  }
  if s.window > 0 then
    s.failures = redis.call('ZCOUNT', fkey, '(' .. (now - s.window), '+inf')
  else
    s.failures = redis.call('ZCARD', fkey)
  end
  s.retry = 0
  if s.phase == 'open' then
    s.retry = math.max(s.open_until - now, 0)
  elseif s.phase == 'half_open' then
    s.retry = math.max(redis.call('PTTL', pkey), 0)
  end
  return s
end

local function reply(before, bkey, fkey, pkey)
  local s = snapshot(bkey, fkey, pkey)
  return {before, s.phase, s.gen, s.failures, s.retry, s.cycles}
end

-- reset_timeout * 2^cycles, capped (the exponent is bounded so the number stays exact).
local function open_timeout(cycles, reset_ms, max_ms)
  return math.min(reset_ms * (2 ^ math.min(cycles, 40)), max_ms)
end

-- Opens the breaker with the escalated timeout; every transition bumps gen.
local function open(bkey, fkey, cycles, reset_ms, max_ms)
  local open_until = now + open_timeout(cycles, reset_ms, max_ms)
  redis.call('HSET', bkey, 'phase', 'open', 'open_until', open_until, 'cycles', cycles + 1)
  redis.call('HINCRBY', bkey, 'gen', 1)
  redis.call('DEL', fkey)
end

local function close(bkey, fkey)
  redis.call('HSET', bkey, 'phase', 'closed', 'open_until', 0, 'cycles', 0)
  redis.call('HINCRBY', bkey, 'gen', 1)
  redis.call('DEL', fkey)
end
