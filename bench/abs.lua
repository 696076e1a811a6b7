-- wrk script for bench/proxy-bench.ts --wrk: wrk has no proxy option, so it connects to the proxy given on the
-- command line and sends absolute-form request lines for $TARGET (plain HTTP only).
local target = os.getenv("TARGET")
wrk.path = target
wrk.headers["Host"] = target:match("^https?://([^/]+)")
