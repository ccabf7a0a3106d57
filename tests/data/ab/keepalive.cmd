ab -k -c 8 -n 2000 http://127.0.0.1:40985/   # tiny Python HTTP/1.1 server (TCP_NODELAY) answering keep-alive requests with 'Connection: keep-alive', 627-byte static body
# exit status: 0
