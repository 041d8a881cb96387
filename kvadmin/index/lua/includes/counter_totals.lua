-- The call's counter totals, and their names in first-seen order: unknown tags are kept per
-- stream in the order they came, so the first ones are the stream's first.
local totals, order = {}, {}

local function add_total(name, n)
  local total = totals[name]
  if total == nil then
    order[#order + 1] = name
    total = 0
  end
  totals[name] = total + n
end

-- Add the totals to the stream's status hash. Unknown event tags
-- (keys.UNKNOWN_TAG_FIELD_PREFIX) are engine-chosen text: the status keeps the first
-- `max_tags` distinct ones (their number in 'unknown_tags'); later ones count in
-- skipped_unknown_tag only.
local function add_totals(status, max_tags)
  for _, name in ipairs(order) do
    local count = totals[name]
    if count ~= 0 then
      if string.sub(name, 1, 12) ~= 'unknown_tag:' then
        redis.call('HINCRBY', status, name, count)
      elseif redis.call('HEXISTS', status, name) == 1 then
        redis.call('HINCRBY', status, name, count)
      elseif tonumber(redis.call('HGET', status, 'unknown_tags') or '0') < max_tags then
        redis.call('HINCRBY', status, 'unknown_tags', 1)
        redis.call('HINCRBY', status, name, count)
      end
    end
  end
end
