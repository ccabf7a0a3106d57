wrk -t1 -c2 -d2 -s done.lua http://127.0.0.1:18303/   # Lua done() prints after the report
# exit status: 0
