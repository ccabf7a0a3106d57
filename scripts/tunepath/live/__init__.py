"""Live mode: hosts, host state, facts, Tomcat, httpd, load generators, and running one step or a whole run on
real hosts."""

import logging

# paramiko logs every failed connection attempt (a server rebooting, sshd restarting) as an error with
# a traceback on stderr; tunepath retries and reports what failed itself, in one line
logging.getLogger("paramiko").addHandler(logging.NullHandler())
