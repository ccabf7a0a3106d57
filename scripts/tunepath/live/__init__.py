"""Live mode: hosts, host state, facts, Tomcat, httpd, load generators, and running one step or a whole run on real hosts."""
