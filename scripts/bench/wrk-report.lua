-- wrk script for scripts/bench-scrape.sh: prints one machine-readable line when the run ends.
-- WRK_DELAY_MS > 0 makes each connection wait between requests (a scraper with an interval)
-- instead of sending back to back: a uniform random 0 .. 2 x WRK_DELAY_MS before every request,
-- the first included, so connections do not scrape in lockstep.
local think = tonumber(os.getenv("WRK_DELAY_MS") or "0") or 0
if think > 0 then
  function setup(thread)
    thread:set("seed", math.random(1, 1000000))
  end
  function init(args)
    math.randomseed(seed or os.time())
  end
  function delay()
    return math.random(0, 2 * think)
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f requests=%d duration_s=%.3f socket_errors=%d non2xx=%d bytes=%d\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.requests, summary.duration / 1e6,
    e.connect + e.read + e.write + e.timeout, e.status, summary.bytes))
end
