-- SPDX-License-Identifier: Apache-2.0
-- golden.lua -- a deterministic Lua workload that prints as it goes, for the
-- real-program tier: Debian's lua5.4 under WPP, power-failed at random
-- moments, must print exactly what an uninterrupted run prints. It keeps the
-- interpreter busy in the places a failure can hit: the garbage collector
-- (tables and strings made and dropped), coroutines, closures, string
-- building and pattern matching, sorting, and integer and float arithmetic.

local function lcg(seed)
  local s = seed
  return function()
    s = (s * 1103515245 + 12345) % 2147483648
    return s
  end
end

-- 1. primes by a sieve, printed in blocks
local n = 300000
local sieve = {}
for i = 2, n do sieve[i] = true end
for i = 2, math.floor(math.sqrt(n)) do
  if sieve[i] then
    for j = i * i, n, i do sieve[j] = false end
  end
end
local count, sum = 0, 0
for i = 2, n do
  if sieve[i] then
    count = count + 1
    sum = sum + i
    if count % 2000 == 0 then
      print(string.format("prime %d is %d (sum so far %d)", count, i, sum))
    end
  end
end
print("primes below " .. n .. ": " .. count)

-- 2. a word-frequency table over generated text, sorted
local rnd = lcg(42)
local syll = { "ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "ze", "pu" }
local freq = {}
for line = 1, 4000 do
  local words = {}
  for w = 1, 12 do
    local parts = {}
    for _ = 1, 1 + rnd() % 3 do parts[#parts + 1] = syll[1 + rnd() % #syll] end
    words[w] = table.concat(parts)
  end
  local text = table.concat(words, " ")
  for word in text:gmatch("%a+") do freq[word] = (freq[word] or 0) + 1 end
  if line % 500 == 0 then
    local distinct = 0
    for _ in pairs(freq) do distinct = distinct + 1 end
    print(string.format("line %d: %d distinct words", line, distinct))
  end
end
local keys = {}
for k in pairs(freq) do keys[#keys + 1] = k end
table.sort(keys, function(a, b)
  if freq[a] ~= freq[b] then return freq[a] > freq[b] end
  return a < b
end)
for i = 1, 10 do print(string.format("top %2d: %-8s %d", i, keys[i], freq[keys[i]])) end

-- 3. coroutines: a producer-consumer pipeline with a filter
local function producer(limit)
  return coroutine.wrap(function()
    for i = 1, limit do coroutine.yield(i) end
  end)
end
local function filter(src, pred)
  return coroutine.wrap(function()
    for v in src do if pred(v) then coroutine.yield(v) end end
  end)
end
local acc, seen = 0, 0
for v in filter(producer(400000), function(x) return x % 3 == 0 or x % 7 == 0 end) do
  acc = (acc + v * v) % 1000000007
  seen = seen + 1
  if seen % 40000 == 0 then print(string.format("pipeline %d: %d", seen, acc)) end
end
print("pipeline done: " .. seen .. " values, " .. acc)

-- 4. garbage: trees built and dropped, floats folded in
local function tree(depth)
  if depth == 0 then return { v = depth } end
  return { l = tree(depth - 1), r = tree(depth - 1), v = depth }
end
local function check(t)
  if not t.l then return 1 end
  return 1 + check(t.l) + check(t.r)
end
local f = 0.0
for round = 1, 40 do
  local t = tree(12)
  f = f + check(t) / round
  if round % 5 == 0 then
    print(string.format("round %d: %.6f", round, f))
  end
end
print(string.format("done: %.6f", f))
