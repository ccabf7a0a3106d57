ab -c 4 -n 500 http://127.0.0.1:41897/missing   # same server answers 404 with a fixed 10-byte body
# exit status: 0
