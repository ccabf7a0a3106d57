# HOME=<empty directory> siege -R siegerc -b -c 8 -t 5S http://127.0.0.1:18980/examples/servlets/servlet/HelloWorldExample > first-run.out 2>&1
# siege's first run for that user: it creates ~/.siege and says so on stdout (the home directory shown as ~, as the run recorder masks it)
# exit status: 0
