wrk -t2 -c10 -d5 --latency http://127.0.0.1:18302/   # server killed with SIGKILL after 2 s
# exit status: 0
