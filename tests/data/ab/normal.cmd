ab -c 8 -n 2000 http://127.0.0.1:41897/   # tiny Python HTTP/1.1 server (ThreadingHTTPServer), 627-byte static body
# exit status: 0
