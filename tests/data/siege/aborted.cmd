# siege -R siegerc-f3 -b -c 2 -t 3S http://127.0.0.1:18932/examples/servlets/servlet/HelloWorldExample > aborted.out 2>&1
# nothing listens on port 18932; siegerc-f3 is README.md's siegerc with failures = 3: siege aborts after the third failure
# exit status: 0
