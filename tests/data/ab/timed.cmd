ab -c 4 -t 2 http://127.0.0.1:41897/   # same server; time limit 2 s (ab caps at 50000 requests)
# exit status: 0
