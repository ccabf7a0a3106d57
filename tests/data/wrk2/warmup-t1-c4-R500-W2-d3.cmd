wrk2 -t1 -c4 -R500 -W2 -d3 --latency -U http://127.0.0.1:18461/   # the project's patched wrk2 (fix 6); a Python keep-alive server answering 200 with a 3-byte body
# exit status: 0
