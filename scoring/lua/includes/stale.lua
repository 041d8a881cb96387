-- Staleness of an owner's value (scoring.values.is_stale), exact for any decimal text as Go's
-- strconv.ParseInt reads it. Reads the including script's `started` and `started_text`
-- (pod -> its last start, as a number and as the text given).

-- A decimal integer as (negative, digits without leading zeros), nil if text is not one.
local function canonical(text)
  local sign, digits = match(text, '^([+-]?)([0-9]+)$')
  if not digits then
    return nil
  end
  digits = match(digits, '^0*([0-9].*)$')
  return sign == '-' and digits ~= '0', digits
end

-- Compare digit strings of equal length, 15 digits at a time (exact as doubles).
local function compare_digits(a, b)
  for i = 1, #a, 15 do
    local x, y = tonumber(sub(a, i, i + 14)), tonumber(sub(b, i, i + 14))
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end

local function compare_magnitude(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  return compare_digits(a, b)
end

local INT64_MAX, INT64_MIN_MAGNITUDE = '9223372036854775807', '9223372036854775808'

-- Go's strconv.ParseInt(text, 10, 64) as (negative, digits); nil where it fails.
local function go_int64(text)
  local negative, digits = canonical(text)
  if not digits then
    return nil
  end
  if compare_magnitude(digits, negative and INT64_MIN_MAGNITUDE or INT64_MAX) > 0 then
    return nil
  end
  return negative, digits
end

-- Written at or before the pod's last start (scoring.values.is_stale).
local function is_stale(pod, timestamp)
  local start = started[pod]
  if not start then
    return false
  end
  if #timestamp <= 15 and match(timestamp, '^[0-9]+$') then
    -- Exact as a double; comparing with the rounded start keeps the order exact too.
    return tonumber(timestamp) <= start
  end
  local negative, digits = go_int64(timestamp)
  if not digits then
    return false
  end
  local start_negative, start_digits = canonical(started_text[pod])
  if negative ~= start_negative then
    return negative
  end
  local order = compare_magnitude(digits, start_digits)
  if negative then
    return order >= 0
  end
  return order <= 0
end
