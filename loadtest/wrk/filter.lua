-- POST /filter with ready extender bodies, one per line (`hami-loadtest bodies` writes them),
-- sent in rotation with content-type application/json: how an outside checker drives an extender.
--
--   wrk -t1 -c1 -d10s --latency -s loadtest/wrk/filter.lua http://127.0.0.1:PORT -- BODIES [KEY=VALUE...]
--
--   first=N     the first body sent is line N (0-based; default 0)
--   count=N     send lines first .. first+N-1 only (default: to the end), so that rounds against
--               one long-lived scheduler can each send pods it has not seen
--   check=0     do not read the answers (wrk then skips the headers and body; default 1: each
--               answer is counted as one node chosen, no node, or an error)
--   once=1      send each body at most once: the thread stops after the last body's answer, before
--               the rotation wraps (wrk still waits out -d; implies check=1)
--   quantiles=F write the latency quantiles to F (1000 lines "fraction microseconds", the
--               midpoints of each 0.1 %, then "max microseconds"), for pooling rounds
--
-- done() prints one line, after wrk's own report:
--   filter.lua: requests=… bodies=… sent=… repeated=… p50_us=… p90_us=… p99_us=… p999_us=…
--     max_us=… mean_us=… chosen=… nofit=… error=… non200=…
-- `repeated` counts bodies sent more than once (the rotation wrapped): a scheduler sees those
-- pods again, which kube-scheduler never does.
-- Each thread loads its own copy of the slice; use -t1 (one thread) as the checker does.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  -- wrk calls the first thread's request() once before the run to count pipelined requests
  -- (script_verify_request); that request is never sent, so it must not use up a body.
  thread:set("unsent_first_call", #threads == 1)
end

local bodies = {}
local n = 0
local next_body = 1
local headers = { ["Content-Type"] = "application/json" }

function init(args)
  local path = args[1]
  if path == nil then
    error("filter.lua: name the bodies file: wrk … -s filter.lua URL -- BODIES [first=N] [count=N]")
  end
  local opt = {}
  for i = 2, #args do
    local k, v = string.match(args[i], "^([%w_]+)=(.*)$")
    if k == nil then error("filter.lua: " .. args[i] .. " is not KEY=VALUE") end
    opt[k] = v
  end
  local first = tonumber(opt.first or "0")
  local count = tonumber(opt.count or "-1")
  local f = assert(io.open(path, "r"))
  local line_no = 0
  for line in f:lines() do
    if count >= 0 and n >= count then break end
    if line_no >= first and #line > 0 then
      n = n + 1
      bodies[n] = line
    end
    line_no = line_no + 1
  end
  f:close()
  if n == 0 then error("filter.lua: no bodies in " .. path .. " from line " .. first) end
  loaded, sent, chosen, nofit, failed, non200 = n, 0, 0, 0, 0, 0
  quantiles_file = opt.quantiles
  sample = ""
  once = opt.once == "1"
  answered = 0
  if opt.check == "0" and not once then response = nil end
end

function request()
  if unsent_first_call then
    unsent_first_call = false
    return wrk.format("POST", "/filter", headers, bodies[1])
  end
  if once and sent >= n then
    -- wrk may ask for one more request after the thread was told to stop; it gets no pod.
    return wrk.format("GET", "/readyz", {})
  end
  local body = bodies[next_body]
  next_body = next_body % n + 1
  sent = sent + 1
  return wrk.format("POST", "/filter", headers, body)
end

-- Answers are kube-scheduler's ExtenderFilterResult: one name in NodeNames is a decision; no name
-- with FailedNodes is "does not fit"; a non-empty Error is an error.
function response(status, headers, body)
  answered = answered + 1
  if once and answered >= n then wrk.thread:stop() end
  if status ~= 200 then
    non200 = non200 + 1
  elseif not string.find(body, '"Error":""', 1, true) then
    failed = failed + 1
  elseif string.find(body, '"NodeNames":%["') then
    chosen = chosen + 1
    return
  else
    nofit = nofit + 1
  end
  if sample == "" then sample = string.sub(body, 1, 300) end
end

function done(summary, latency, requests)
  local total = { loaded = 0, sent = 0, chosen = 0, nofit = 0, failed = 0, non200 = 0, repeated = 0 }
  local qfile, sample_out = nil, ""
  for _, t in ipairs(threads) do
    local l, s = t:get("loaded"), t:get("sent")
    total.loaded = total.loaded + l
    total.sent = total.sent + s
    if s > l then total.repeated = total.repeated + (s - l) end
    for _, k in ipairs({ "chosen", "nofit", "failed", "non200" }) do
      total[k] = total[k] + t:get(k)
    end
    qfile = qfile or t:get("quantiles_file")
    if sample_out == "" then sample_out = t:get("sample") or "" end
  end
  if qfile then
    local f = assert(io.open(qfile, "w"))
    for k = 1, 1000 do
      local p = (k - 0.5) / 10
      f:write(string.format("%.4f %d\n", p / 100, latency:percentile(p)))
    end
    f:write(string.format("max %d\n", latency.max))
    f:write(string.format("requests %d\n", summary.requests))
    f:close()
  end
  io.write(string.format(
    "filter.lua: requests=%d bodies=%d sent=%d repeated=%d p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.0f chosen=%d nofit=%d error=%d non200=%d\n",
    summary.requests, total.loaded, total.sent, total.repeated,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean, total.chosen, total.nofit, total.failed, total.non200))
  if sample_out ~= "" then
    io.write("filter.lua: first answer without a node: " .. sample_out .. "\n")
  end
end
