wrk   # no arguments
# exit status: 1
