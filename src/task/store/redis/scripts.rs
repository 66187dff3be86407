//! The Lua scripts: each is one atomic step on one hash slot (all its keys share a hash tag).
//!
//! Scripts touch only keys of one task (`{task id}`) or of one owner (`{o:owner}`); a key they
//! build from an argument (a context index) carries the same tag, so they run unchanged on
//! Redis Cluster.
use std::sync::LazyLock;

use redis::Script;

/// The tail shared by [`SAVE`] and [`APPEND_BATCH`]: the first time a task is stored finished, note
/// when and let its keys expire after the retention age.
/// KEYS[1..3] = task, events, push; ARGV[3] = "1" if finished, ARGV[4] = now ms, ARGV[5] = ttl ms.
const FINISH: &str = r"
local newly = 0
if ARGV[3] == '1' and redis.call('HEXISTS', KEYS[1], 'fin') == 0 then
  redis.call('HSET', KEYS[1], 'fin', ARGV[4])
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
  newly = 1
end
";

/// Stores a task (no event). KEYS: task, events, push. ARGV: task bytes, owner id, finished,
/// now ms, ttl ms. Returns {'owner', stored owner} when the id belongs to another owner, else
/// {'ok', newly finished}.
pub static SAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"
local stored_owner = redis.call('HGET', KEYS[1], 'owner')
if stored_owner and stored_owner ~= ARGV[2] then return {{'owner', stored_owner}} end
redis.call('HSET', KEYS[1], 'task', ARGV[1], 'owner', ARGV[2])
{FINISH}
return {{'ok', tostring(newly)}}
"
    ))
});

/// Appends a batch of consecutive events and stores the task they produced, in one step: the
/// fleet owner's write path (one round trip for however many events piled up meanwhile).
/// KEYS: task, events, push, lease. ARGV: task bytes, owner id, finished, now ms, ttl ms,
/// first seq, max stream length, lease holder ('' = no lease check), then the events.
/// Refuses ({reason, detail}) unless the lease (if given) names the writer, the stored owner
/// is the writer's and the stored seq is exactly first - 1.
pub static APPEND_BATCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"
if ARGV[8] ~= '' then
  local holder = redis.call('GET', KEYS[4])
  if holder ~= ARGV[8] then return {{'lease', holder or ''}} end
end
local stored_owner = redis.call('HGET', KEYS[1], 'owner')
if stored_owner and stored_owner ~= ARGV[2] then return {{'owner', stored_owner}} end
-- A new task's first event is 2 (generation 1 is its creation, which has no event).
local stored = redis.call('HGET', KEYS[1], 'seq') or (ARGV[6] == '2' and '1' or '0')
local first = tonumber(ARGV[6])
if tonumber(stored) + 1 ~= first then return {{'seq', stored}} end
local last = first - 1
for i = 9, #ARGV do
  last = first + i - 9
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], last .. '-0', 'e', ARGV[i])
end
redis.call('HSET', KEYS[1], 'task', ARGV[1], 'owner', ARGV[2], 'seq', last)
{FINISH}
return {{'ok', tostring(newly)}}
"
    ))
});

/// Moves a task to its current place in its owner's indexes. KEYS: owner index, owner meta.
/// ARGV: context index key prefix, task id, position, state, encoded context id.
pub static INDEX: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local new = ARGV[4] .. '|' .. ARGV[3] .. '|' .. ARGV[5]
local old = redis.call('HGET', KEYS[2], ARGV[2])
if old == new then return 0 end
if old then
  local _, _, position, ctx = string.find(old, '^[^|]*|([^|]*)|(.*)$')
  redis.call('ZREM', KEYS[1], position .. ':' .. ARGV[2])
  redis.call('ZREM', ARGV[1] .. ctx, position .. ':' .. ARGV[2])
end
redis.call('ZADD', KEYS[1], 0, ARGV[3] .. ':' .. ARGV[2])
redis.call('ZADD', ARGV[1] .. ARGV[5], 0, ARGV[3] .. ':' .. ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], new)
return 1
",
    )
});

/// Takes a task out of its owner's indexes. KEYS: owner index, owner meta. ARGV: context index
/// key prefix, task id, expected position ('' = wherever it is). A reader that found a stale
/// entry passes the position it saw, so it never removes an entry a writer just moved.
pub static UNINDEX: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local old = redis.call('HGET', KEYS[2], ARGV[2])
if not old then
  if ARGV[3] ~= '' then redis.call('ZREM', KEYS[1], ARGV[3] .. ':' .. ARGV[2]) end
  return 0
end
local _, _, position, ctx = string.find(old, '^[^|]*|([^|]*)|(.*)$')
if ARGV[3] ~= '' and ARGV[3] ~= position then return 0 end
redis.call('ZREM', KEYS[1], position .. ':' .. ARGV[2])
redis.call('ZREM', ARGV[1] .. ctx, position .. ':' .. ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
",
    )
});

/// One page of an index and the total. KEYS: index, owner meta. ARGV: page start (ZRANGE
/// BYLEX bound), end bound, state ('' = any), page size + 1. Returns {total, members...}.
pub static LIST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local limit = tonumber(ARGV[4])
if ARGV[3] == '' then
  local total = redis.call('ZLEXCOUNT', KEYS[1], '-', ARGV[2])
  local page = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'LIMIT', 0, limit)
  table.insert(page, 1, total)
  return page
end
local function matches(member)
  local meta = redis.call('HGET', KEYS[2], string.sub(member, 34))
  return meta and string.sub(meta, 1, #ARGV[3] + 1) == ARGV[3] .. '|'
end
local total = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], '-', ARGV[2], 'BYLEX')) do
  if matches(member) then total = total + 1 end
end
local page = {total}
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX')) do
  if #page > limit then break end
  if matches(member) then table.insert(page, member) end
end
return page
",
    )
});

/// Inserts or replaces a push config, refusing a new one beyond the cap. KEYS: push, task.
/// ARGV: owner id .. '/', config id, config bytes, cap. A value is a 20-digit creation number
/// (kept on replace, so listing keeps creation order) and the bytes. Returns 1, or 0 if full.
pub static PUT_PUSH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local field = ARGV[1] .. ARGV[2]
local old = redis.call('HGET', KEYS[1], field)
if old then
  redis.call('HSET', KEYS[1], field, string.sub(old, 1, 20) .. ARGV[3])
  return 1
end
local n = 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, #ARGV[1]) == ARGV[1] then n = n + 1 end
end
if n >= tonumber(ARGV[4]) then return 0 end
local created = redis.call('HINCRBY', KEYS[1], '#', 1)
redis.call('HSET', KEYS[1], field, string.format('%020d', created) .. ARGV[3])
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
",
    )
});

/// The finished tasks retention removes now: the oldest, as many as are over the count or
/// older than the cutoff, at most a batch; taken out of the set in the same step, so callers
/// evicting at once each get other tasks. KEYS: finished. ARGV: cutoff ms, max count, batch.
pub static EXPIRED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
local old = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])
local n = math.min(math.max(over, old), tonumber(ARGV[3]))
if n <= 0 then return {} end
local members = redis.call('ZRANGE', KEYS[1], 0, n - 1)
redis.call('ZREM', KEYS[1], unpack(members))
return members
",
    )
});

/// Takes the lease, or extends it if it is ours already. KEYS: lease. ARGV: replica, ttl ms.
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if holder then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
",
    )
});

/// Extends the lease only if `ARGV[1]` still holds it. KEYS: lease. ARGV: replica, ttl ms.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
",
    )
});

/// Deletes the lease only if `ARGV[1]` holds it. KEYS: lease. ARGV: replica.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
",
    )
});
