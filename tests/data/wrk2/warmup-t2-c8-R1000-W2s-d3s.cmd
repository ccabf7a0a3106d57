wrk2 -t2 -c8 -R1000 -W2s -d3s --latency http://127.0.0.1:18462/   # the project's patched wrk2 (fix 6); a Python keep-alive server answering 200 with a 3-byte body
# exit status: 0
