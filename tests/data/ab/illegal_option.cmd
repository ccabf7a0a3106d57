ab -Q http://127.0.0.1:39771/   # illegal option: Debian ab 2.3 prints "illegal option" on stderr, goes on and benchmarks the URL once with the defaults (exit status 0); one request prints no percentile table
# exit status: 0
