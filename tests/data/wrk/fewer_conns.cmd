wrk -t2 -c1 -d1 http://127.0.0.1:18302/   # fewer connections than threads
# exit status: 1
