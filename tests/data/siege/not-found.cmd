# siege -R siegerc -b -c 4 -t 2S http://127.0.0.1:18980/examples/no-such-page > not-found.out 2>&1
# Tomcat answers 404 to every request: siege counts them as transactions, none successful
# exit status: 0
