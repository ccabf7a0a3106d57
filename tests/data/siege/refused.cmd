# siege -R siegerc -b -c 2 -r 2 http://127.0.0.1:18932/examples/servlets/servlet/HelloWorldExample > refused.out 2>&1
# nothing listens on port 18932: every connection is refused (color = off still colours siege's error tag)
# exit status: 0
