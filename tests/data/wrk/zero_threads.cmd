wrk -t0 -c1 -d1 http://127.0.0.1:18302/
# exit status: 1
