wrk -t1 -c4 -d3 --latency http://127.0.0.1:18301/   # a server that accepts and never answers
# exit status: 0
