ab -c 4 -n 10   # no URL: ab prints its usage text on stderr
# exit status: 22
