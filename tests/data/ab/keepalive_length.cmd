ab -k -c 4 -n 500 http://127.0.0.1:40985/dynamic   # same server; /dynamic returns a body whose length varies (100-106 bytes): ab counts every length differing from the first as a Length failure
# exit status: 0
