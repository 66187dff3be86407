//! The Lua scripts: each is one atomic step on one hash slot (all its keys share a hash tag).
//!
//! Scripts touch only keys of one task (`{task id}`) or of one owner (`{o:owner}`); a key they
//! build from an argument (a context index) carries the same tag, so they run unchanged on
//! Redis Cluster.
use std::sync::LazyLock;

use redis::Script;

/// Lua functions the write scripts share, so the single-node script that does a whole write
/// in one step ([`WRITE`]) and the per-slot scripts a cluster needs run the same code.
///
/// - `finish(task, events, push, fin, now, ttl)`: the first time a task is stored finished,
///   note when and let its keys expire after the retention age; returns '1' then.
/// - `append(K, A, from)`: the owner's append. K = task, events, push, lease keys; A = task
///   bytes ('' = keep the stored Task, behind these events, unless finishing), owner,
///   finished ('1'), now ms, ttl ms, first seq, max stream length, lease holder ('' = no
///   lease check), events from A[from]. Returns {reason, detail} when refused, else
///   {'ok', newly finished, bytes the task holds (task + every event appended)}.
/// - `index(all, meta, ctx_prefix, id, position, state, ctx)`: moves a task to its place in its
///   owner's indexes (a context's index only if the task did not open it: `keys.rs`
///   `indexes_context`).
/// - `note(set, sizes, member, now, size)`: notes a finished task for retention (once: a
///   retried note adds nothing); returns {finished tasks, their bytes}, which the caller
///   compares with the limits to wake the evictor (`retention/`).
const FUNCTIONS: &str = r"
local function finish(task, events, push, fin, now, ttl)
  if fin then return '0' end
  redis.call('HSET', task, 'fin', now)
  redis.call('PEXPIRE', task, ttl)
  redis.call('PEXPIRE', events, ttl)
  redis.call('PEXPIRE', push, ttl)
  return '1'
end

local function append(K, A, from)
  if A[8] ~= '' then
    local holder = redis.call('GET', K[4])
    if holder ~= A[8] then return {'lease', holder or ''} end
  end
  local stored = redis.call('HMGET', K[1], 'owner', 'seq', 'bytes', 'fin')
  if stored[1] and stored[1] ~= A[2] then return {'owner', stored[1]} end
  -- A new task's first event is 2 (generation 1 is its creation, which has no event).
  local seq = stored[2] or (A[6] == '2' and '1' or '0')
  local first = tonumber(A[6])
  -- A finished task takes no more events (a writer that lost it to a takeover, and took the
  -- lease again after the survivor let it go, must not write past its end), and a writer that
  -- finds it finished by another must not take that end for its own write landed with its
  -- reply lost, even where the seq it expected was passed: only its own Task, the same bytes,
  -- is its own.
  if stored[4] and (A[3] ~= '1' or redis.call('HGET', K[1], 'task') ~= A[1]) then
    return {'finished', seq}
  end
  if tonumber(seq) + 1 ~= first then return {'seq', seq} end
  if stored[4] then return {'finished', seq} end
  local last = first - 1
  local bytes = tonumber(stored[3] or '0')
  for i = from, #A do
    last = first + i - from
    bytes = bytes + #A[i]
    redis.call('XADD', K[2], 'MAXLEN', '~', A[7], last .. '-0', 'e', A[i])
  end
  if A[1] == '' and A[3] ~= '1' then
    -- The Task stays as stored, some events behind (its generation says which it includes);
    -- 'lag' tells readers to replay the rest (snapshot.rs). The size returned leaves it out:
    -- such a write neither finishes nor moves the task, so nothing notes its size.
    redis.call('HSET', K[1], 'seq', last, 'bytes', bytes, 'lag', '1')
    return {'ok', '0', tostring(bytes)}
  end
  if A[3] ~= '1' then
    -- A live task's first write: its webhooks (if any) live as long as it does.
    if not stored[1] then redis.call('PERSIST', K[3]) end
    redis.call('HSET', K[1], 'task', A[1], 'owner', A[2], 'seq', last, 'bytes', bytes)
    return {'ok', '0', tostring(bytes + #A[1])}
  end
  -- Finishing (a finished task was refused above): 'fin' goes in the same HSET.
  redis.call('HSET', K[1], 'task', A[1], 'owner', A[2], 'seq', last, 'bytes', bytes, 'fin', A[4])
  redis.call('PEXPIRE', K[1], A[5])
  redis.call('PEXPIRE', K[2], A[5])
  redis.call('PEXPIRE', K[3], A[5])
  return {'ok', '1', tostring(bytes + #A[1])}
end

local function index(all, meta, ctx_prefix, id, position, state, ctx)
  local new = state .. '|' .. position .. '|' .. ctx
  local old = redis.call('HGET', meta, id)
  if old == new then return 0 end
  if old then
    local _, _, old_position, old_ctx = string.find(old, '^[^|]*|([^|]*)|(.*)$')
    redis.call('ZREM', all, old_position .. ':' .. id)
    redis.call('ZREM', ctx_prefix .. old_ctx, old_position .. ':' .. id)
  end
  redis.call('ZADD', all, 0, position .. ':' .. id)
  if ctx ~= id then redis.call('ZADD', ctx_prefix .. ctx, 0, position .. ':' .. id) end
  redis.call('HSET', meta, id, new)
  return 1
end

local function note(set, sizes, member, now, size)
  if redis.call('ZADD', set, 'NX', now, member) == 1 then
    return {redis.call('ZCARD', set), redis.call('HINCRBY', sizes, '#', size)}
  end
  return {redis.call('ZCARD', set), tonumber(redis.call('HGET', sizes, '#') or '0')}
end

";

/// A script of [`FUNCTIONS`] and a body that calls them.
fn with_functions(body: &str) -> Script {
    Script::new(&format!("{FUNCTIONS}\n{body}"))
}

/// Stores a task (no event). KEYS: task, events, push. ARGV: task bytes, owner id, finished,
/// now ms, ttl ms. Returns {'owner', stored owner} when the id belongs to another owner, else
/// {'ok', newly finished, bytes the task holds}.
pub static SAVE: LazyLock<Script> = LazyLock::new(|| {
    with_functions(
        r"
local stored = redis.call('HMGET', KEYS[1], 'owner', 'bytes', 'fin')
if stored[1] and stored[1] ~= ARGV[2] then return {'owner', stored[1]} end
if not stored[1] and ARGV[3] ~= '1' then redis.call('PERSIST', KEYS[3]) end
redis.call('HSET', KEYS[1], 'task', ARGV[1], 'owner', ARGV[2])
local newly = '0'
if ARGV[3] == '1' then newly = finish(KEYS[1], KEYS[2], KEYS[3], stored[3], ARGV[4], ARGV[5]) end
return {'ok', newly, tostring(tonumber(stored[2] or '0') + #ARGV[1])}
",
    )
});

/// Appends a batch of consecutive events and stores the task they produced, in one step: the
/// fleet owner's write path (one round trip for however many events piled up meanwhile).
/// KEYS: task, events, push, lease. ARGV: task bytes, owner id, finished, now ms, ttl ms,
/// first seq, max stream length, lease holder ('' = no lease check), then the events.
/// Refuses ({reason, detail}) unless the lease (if given) names the writer, the stored owner
/// is the writer's, the stored seq is exactly first - 1 and the task is not finished.
pub static APPEND_BATCH: LazyLock<Script> = LazyLock::new(|| with_functions("return append(KEYS, ARGV, 9)"));

/// Moves a task to its current place in its owner's indexes. KEYS: owner index, owner meta.
/// ARGV: context index key prefix, task id, position, state, encoded context id.
pub static INDEX: LazyLock<Script> = LazyLock::new(|| {
    with_functions("return index(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])")
});

/// Notes a finished task for retention. KEYS: finished set, finished sizes. ARGV: member,
/// now ms, size. Returns {finished tasks, their bytes}.
pub static NOTE: LazyLock<Script> =
    LazyLock::new(|| with_functions("return note(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])"));

/// Takes members the evictor chose out of one piece of the retention set, with their bytes,
/// and returns those that were still there (two evictors choosing the same task: one gets
/// it). KEYS: finished set, finished sizes. ARGV: per member, the member, its size (as the
/// evictor read it) and '1' if that size is in the sizes hash (a member of the old form).
/// No pattern matching here: the evictor parsed the members already.
pub static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local members = {}
for i = 1, #ARGV, 3 do members[#members + 1] = ARGV[i] end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(members))
local taken, stale, freed = {}, {}, 0
for j, member in ipairs(members) do
  if scores[j] then
    freed = freed + tonumber(ARGV[3 * j - 1])
    if ARGV[3 * j] == '1' then stale[#stale + 1] = member end
    taken[#taken + 1] = member
  end
end
if #taken > 0 then redis.call('ZREM', KEYS[1], unpack(taken)) end
if #stale > 0 then redis.call('HDEL', KEYS[2], unpack(stale)) end
if freed > 0 then redis.call('HINCRBY', KEYS[2], '#', -freed) end
return taken
",
    )
});

/// A whole owner's write on a single Redis node, in one step and one round trip: the append
/// (refused as [`APPEND_BATCH`] is), then the index move and, once finished, the retention
/// note. A cluster runs the same functions slot by slot instead.
/// With the durable push outbox on, a task with webhooks (its push hash exists) also gets an
/// outbox entry per event, carrying the event, in the same step (`outbox.rs`).
/// KEYS: task, events, push, lease, owner index, owner meta, finished set, finished sizes,
/// outbox. ARGV: 1-8 as [`APPEND_BATCH`]; 9 reindex ('1'); 10-13 as [`INDEX`]'s ARGV 1, 3, 4,
/// 5 (the task id is the task's); 14 task id; 15 `<owner id>/<task id>`; 16 the outbox's
/// length bound ('' = no outbox); 17 the encoded `messageId` that made the task, whose
/// SendMessage record retention drops with it ('' = none); then the events. Returns {'ok',
/// newly finished, size, finished tasks, their bytes} or a refusal.
pub static WRITE: LazyLock<Script> = LazyLock::new(|| {
    with_functions(
        r"
local appended = append(KEYS, ARGV, 18)
if appended[1] ~= 'ok' then return appended end
if ARGV[16] ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then
  local first = tonumber(ARGV[6])
  for i = 18, #ARGV do
    redis.call('XADD', KEYS[9], 'MAXLEN', '~', ARGV[16], '*', 't', ARGV[14], 's', first + i - 18, 'o', ARGV[2], 'e', ARGV[i])
  end
end
if ARGV[9] == '1' or appended[2] == '1' then
  index(KEYS[5], KEYS[6], ARGV[10], ARGV[14], ARGV[11], ARGV[12], ARGV[13])
end
if appended[2] == '1' then
  local context = ARGV[13]
  if context == ARGV[14] then context = '' end
  if ARGV[17] ~= '' then context = context .. '&' .. ARGV[17] end
  local member = ARGV[15] .. '|' .. ARGV[11] .. '|' .. context .. '|' .. appended[3]
  local noted = note(KEYS[7], KEYS[8], member, ARGV[4], appended[3])
  table.insert(appended, noted[1])
  table.insert(appended, noted[2])
end
return appended
",
    )
});

/// Takes tasks out of one owner's indexes. KEYS: owner index, owner meta. ARGV: context index
/// key prefix, then pairs of task id and expected position ('' = wherever it is). A reader that
/// found a stale entry passes the position it saw, so it never removes an entry a writer just
/// moved. Returns how many it removed.
pub static UNINDEX: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local removed = 0
for i = 2, #ARGV - 1, 2 do
  local id, expected = ARGV[i], ARGV[i + 1]
  local old = redis.call('HGET', KEYS[2], id)
  if not old then
    if expected ~= '' then redis.call('ZREM', KEYS[1], expected .. ':' .. id) end
  else
    local _, _, position, ctx = string.find(old, '^[^|]*|([^|]*)|(.*)$')
    if expected == '' or expected == position then
      redis.call('ZREM', KEYS[1], position .. ':' .. id)
      redis.call('ZREM', ARGV[1] .. ctx, position .. ':' .. id)
      redis.call('HDEL', KEYS[2], id)
      removed = removed + 1
    end
  end
end
return removed
",
    )
});

/// One page of an index and the total. KEYS: index, owner meta. ARGV: page start (ZRANGE
/// BYLEX bound), end bound, state ('' = any), page size + 1, and when listing a context, its
/// id (raw, as task ids are in members) and its encoding (as in the meta hash). A context a
/// task opened bears that task's id and may have no index entry for it (`born_finished.rs`):
/// that task is found through the meta hash and merged in. Returns {total, members...}.
pub static LIST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local limit = tonumber(ARGV[4])
local function matches(member)
  if ARGV[3] == '' then return true end
  local meta = redis.call('HGET', KEYS[2], string.sub(member, 34))
  return meta and string.sub(meta, 1, #ARGV[3] + 1) == ARGV[3] .. '|'
end
local extra = nil
if ARGV[5] ~= '' then
  local meta = redis.call('HGET', KEYS[2], ARGV[5])
  if meta then
    local _, _, position, ctx = string.find(meta, '^[^|]*|([^|]*)|(.*)$')
    local member = position .. ':' .. ARGV[5]
    if ctx == ARGV[6] and not redis.call('ZSCORE', KEYS[1], member) and matches(member) then
      extra = member
    end
  end
end
local total, page
if ARGV[3] == '' then
  total = redis.call('ZLEXCOUNT', KEYS[1], '-', ARGV[2])
  page = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'LIMIT', 0, limit)
else
  total = 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], '-', ARGV[2], 'BYLEX')) do
    if matches(member) then total = total + 1 end
  end
  page = {}
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX')) do
    if #page >= limit then break end
    if matches(member) then table.insert(page, member) end
  end
end
if extra and (ARGV[2] == '+' or extra < string.sub(ARGV[2], 2)) then
  total = total + 1
  if ARGV[1] == '-' or extra > string.sub(ARGV[1], 2) then
    local at = #page + 1
    for i, member in ipairs(page) do
      if extra < member then at = i break end
    end
    table.insert(page, at, extra)
    if #page > limit then table.remove(page) end
  end
end
table.insert(page, 1, total)
return page
",
    )
});

/// Inserts or replaces a push config, refusing a new one beyond the cap. KEYS: push, task.
/// ARGV: owner id .. '/', config id, config bytes, cap, a pending hash's expiry in ms. A value
/// is a 20-digit creation number (kept on replace, so listing keeps creation order) and the
/// bytes. The hash expires with a finished task, and after that expiry if the task is not
/// stored yet (a webhook in its creating SendMessage), so that a replica dying before the
/// task's first write leaves nothing for ever; that first write persists it (`append`,
/// [`SAVE`]). Returns 1, or 0 if full.
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
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
elseif ttl == -2 then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return 1
",
    )
});

/// Creates the push outbox's consumer group (and its stream) unless it exists. KEYS: outbox.
/// ARGV: group. An existing group is no error: every replica runs this, and a call that fails
/// counts as a break in its sight of Redis (`conn.rs`), which would hold its sweeper back.
/// Returns 1 when it created the group, 0 when it was there.
pub static OUTBOX_GROUP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.find(created.err, 'BUSYGROUP', 1, true) then return 0 end
  return redis.error_reply(created.err)
end
return 1
",
    )
});

/// Removes the outbox's readers that hold nothing (every reader but the caller, a leader whose
/// takeover of the entries left unacknowledged is done): each restart names a new one, and a
/// group would otherwise keep every reader a fleet ever had. One holding entries stays (deleting
/// it would drop them unacknowledged, never handed out again); in one step, so none is taken
/// between the look and the removal. KEYS: outbox. ARGV: group, the caller. Returns how many.
pub static OUTBOX_FORGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local removed = 0
for _, reader in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local fields = {}
  for i = 1, #reader, 2 do fields[reader[i]] = reader[i + 1] end
  if fields['name'] ~= ARGV[2] and tonumber(fields['pending']) == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], fields['name'])
    removed = removed + 1
  end
end
return removed
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
