ab -c 4 -n 100 http://127.0.0.1:53485/   # nothing listens on this port (closed)
# exit status: 111
