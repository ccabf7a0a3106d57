ab -k -c 8 -n 2000 http://127.0.0.1:39771/   # tiny Python HTTP/1.1 server answering keep-alive requests with 'Connection: keep-alive' but writing headers and body in two sends with Nagle on: every response waits for the client's ~40 ms delayed ACK
# exit status: 0
