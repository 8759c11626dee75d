//! The Redis tier's Lua scripts: each reads and changes several keys at once,
//! atomically (apalis-redis 1.0's layout, and ours beside it).

/// Removes finished jobs answered before a cutoff: the engine's keys of each
/// (apalis-redis 1.0's layout: `<queue>:data`, `<queue>:meta:<id>`, the done
/// and dead sets) and its entry in ours.
pub(super) const VACUUM: &str = r"
    local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
    for _, id in ipairs(ids) do
        redis.call('DEL', ARGV[2] .. id)
        redis.call('HDEL', KEYS[2], id)
        redis.call('SREM', KEYS[3], id)
        redis.call('SREM', KEYS[4], id)
        redis.call('ZREM', KEYS[1], id)
    end
    return #ids
";

/// A submitted job's record, reply and cancellation, and where the engine
/// has it (apalis-redis 1.0's layout: every job passes through the scheduled
/// set, scored by its run time in seconds, then the active list, then a
/// worker's in-flight set).
pub(super) const STORED: &str = r"
    local found = redis.call('HMGET', KEYS[1], 'record', 'result', 'cancelled')
    if not found[1] then return false end
    local state = 'queued'
    if not found[2] and not found[3] then
        local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
        if score then
            if tonumber(score) > tonumber(ARGV[2]) then state = 'scheduled' end
        elseif redis.call('LPOS', KEYS[3], ARGV[1]) then
            state = 'queued'
        elseif redis.call('EXISTS', KEYS[4]) == 1 then
            state = 'running'
        else
            state = 'not_enqueued'
        end
    end
    return {found[1], found[2] or '', found[3] or '', state}
";

/// Takes a submitted job out of the scheduled set or the active list, where
/// no worker has it: atomically with a worker's fetch, so it either runs or
/// is cancelled. The record is kept for the retention; the engine's keys go
/// with the vacuum, as a finished job's.
pub(super) const CANCEL: &str = r"
    if redis.call('HEXISTS', KEYS[1], 'record') == 0 then return 'unknown' end
    if redis.call('HEXISTS', KEYS[1], 'cancelled') == 1 then return 'cancelled' end
    if redis.call('HEXISTS', KEYS[1], 'result') == 1 then return 'late' end
    local removed = redis.call('ZREM', KEYS[2], ARGV[1]) + redis.call('LREM', KEYS[3], 0, ARGV[1])
    if removed == 0 then return 'late' end
    redis.call('HSET', KEYS[1], 'cancelled', ARGV[2])
    redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
    redis.call('HSET', KEYS[4], 'status', 'Killed')
    redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
    return 'cancelled'
";

/// Stores a fleet's next generation (its number and manifest) and announces it.
pub(super) const PUBLISH: &str = r"
    local generation = redis.call('INCR', KEYS[1])
    redis.call('SET', KEYS[2], generation .. '\n' .. ARGV[1])
    redis.call('PUBLISH', KEYS[3], generation)
    return generation
";

/// Claims a call's key for `once`, by the server's clock (ms): `granted`, or
/// what the key holds: `answered` and the outcome, `running` and the ms its
/// claim has left, or `lapsed`. A key holds `c<until>` while claimed and
/// `a<outcome>` once answered, and expires after the keep.
pub(super) const CLAIM_OUTCOME: &str = r"
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local held = redis.call('GET', KEYS[1])
    if not held then
        redis.call('SET', KEYS[1], 'c' .. (now + tonumber(ARGV[1])), 'PX', ARGV[2])
        return {'granted', ''}
    end
    if string.sub(held, 1, 1) == 'a' then return {'answered', string.sub(held, 2)} end
    local left = tonumber(string.sub(held, 2)) - now
    if left > 0 then return {'running', tostring(left)} end
    return {'lapsed', ''}
";

/// Forgets a claim, not an answer.
pub(super) const RELEASE_OUTCOME: &str = r"
    local held = redis.call('GET', KEYS[1])
    if held and string.sub(held, 1, 1) == 'c' then redis.call('DEL', KEYS[1]) end
    return 1
";
