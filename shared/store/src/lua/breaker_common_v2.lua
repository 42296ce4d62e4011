-- breaker_common_v2: prelude shared by the breaker scripts (prepended at build time).
-- The same machine as the node's pure breaker (shared/src/breaker): failures counted since the
-- last close, minus one per success; DEGRADED at the band; OPEN at the threshold; an elapsed
-- OPEN is HALF_OPEN; a failed probe reopens with cycles + 1 and the escalated timeout
-- reset * 2^(cycles - escalation) capped at the max.
-- Breaker hash {phase, gen, cycles, open_until, failures, band, last_failure, quiet}; probe hash
-- {owner, gen} with PX. A DEGRADED breaker without a failure for `quiet` ms (the longest OPEN
-- hold, written by the failure script) is CLOSED again, as the pure breaker's quiet decay.
-- The v1 failure window ZSET (KEYS[2]) is only deleted, so v1 leftovers do not linger.
-- Replies: {before, phase, gen, failures, retry_after_ms, cycles, open_until, now}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function snapshot(bkey)
  local h = redis.call('HMGET', bkey, 'phase', 'gen', 'cycles', 'open_until', 'failures', 'band',
    'last_failure', 'quiet')
  return {
    phase = h[1] or 'closed',
    gen = tonumber(h[2]) or 0,
    cycles = tonumber(h[3]) or 0,
    open_until = tonumber(h[4]) or 0,
    failures = tonumber(h[5]) or 0,
    band = tonumber(h[6]) or 0,
    last_failure = tonumber(h[7]) or 0,
    quiet = tonumber(h[8]) or 0,
  }
end

-- Every phase change bumps gen (the transition counter, never reset).
local function transition(bkey, s, phase)
  s.phase = phase
  redis.call('HSET', bkey, 'phase', phase)
  s.gen = redis.call('HINCRBY', bkey, 'gen', 1)
end

-- BreakerProfile::effective_reset_timeout_ms (the exponent is bounded so the number stays exact).
local function open_timeout(cycles, reset_ms, max_ms, escalation)
  if cycles <= escalation then
    return reset_ms
  end
  local scaled = reset_ms * (2 ^ math.min(cycles - escalation, 40))
  return math.max(math.min(scaled, max_ms), reset_ms)
end

local function open(bkey, s, timeout_ms)
  s.open_until = now + timeout_ms
  redis.call('HSET', bkey, 'open_until', s.open_until, 'cycles', s.cycles)
  transition(bkey, s, 'open')
end

local function close(bkey, fkey, s)
  s.failures = 0
  s.cycles = 0
  s.open_until = 0
  redis.call('HSET', bkey, 'open_until', 0, 'cycles', 0, 'failures', 0)
  transition(bkey, s, 'closed')
  redis.call('DEL', fkey)
end

-- The lazy steps of the pure breaker's refresh: a quiet DEGRADED is CLOSED, an elapsed OPEN is
-- HALF_OPEN. Every script's KEYS[2] is the v1 window key that a close deletes.
local function refresh(bkey, s)
  if s.phase == 'degraded' and s.last_failure > 0 and s.quiet > 0
      and now - s.last_failure >= s.quiet then
    close(bkey, KEYS[2], s)
  end
  if s.phase == 'open' and now >= s.open_until then
    transition(bkey, s, 'half_open')
  end
end

-- A counted failure: the time and the quiet window go with it (the success and read paths
-- have no parameters).
local function count_failure(bkey, s, quiet_ms)
  s.failures = redis.call('HINCRBY', bkey, 'failures', 1)
  s.last_failure = now
  redis.call('HSET', bkey, 'last_failure', now, 'quiet', quiet_ms)
end

local function reply(before, s, pkey)
  local retry = 0
  local open_until = 0
  if s.phase == 'open' then
    retry = math.max(s.open_until - now, 0)
    open_until = s.open_until
  elseif s.phase == 'half_open' then
    retry = math.max(redis.call('PTTL', pkey), 0)
  end
  return {before, s.phase, s.gen, s.failures, retry, s.cycles, open_until, now}
end
