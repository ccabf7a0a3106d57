ab -k -c 8 -n 2000 http://127.0.0.1:41897/   # same server, which did not yet send "Connection: keep-alive": ab waits for a close and times out after 30 s
# exit status: 119
