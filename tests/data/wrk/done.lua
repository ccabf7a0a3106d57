done = function(summary, latency, requests)
  io.write("------------------------------\n")
  io.write(string.format("script: %d requests, p99 %d us\n", summary.requests, latency:percentile(99)))
end
