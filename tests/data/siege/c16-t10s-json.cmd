# siege -R siegerc -j -b -c 16 -t 10S http://127.0.0.1:18980/examples/servlets/servlet/HelloWorldExample > c16-t10s-json.out   (stderr: one empty line)
# Tomcat 11.0.10 (stock server.xml), siegerc as in README.md
# exit status: 0
