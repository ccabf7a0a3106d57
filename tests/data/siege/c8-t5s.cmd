# siege -R siegerc -b -c 8 -t 5S http://127.0.0.1:18980/examples/servlets/servlet/HelloWorldExample > c8-t5s.out 2>&1
# Tomcat 11.0.10 (stock server.xml: maxKeepAliveRequests 100), Java 17, on this 2-CPU VM
# siegerc: README.md, with failures = 1024 (siege's default) for this run
# exit status: 0
