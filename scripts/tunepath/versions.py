"""Pinned versions of the software the path installs, with their checksums.

No imports on purpose: ``tunepath parse`` and the CLI's argument parser read these
without loading the live (SSH) machinery. :mod:`tunepath.live.tomcat` re-exports them.
"""

TOMCAT_VERSION = "11.0.10"
# SHA-512 of apache-tomcat-11.0.10.tar.gz as served by Maven Central
# (org.apache.tomcat:tomcat:11.0.10:tar.gz), pinned at first download.
TOMCAT_SHA512 = {
    "11.0.10": "404143be042016fcc8e2d9d960dafe39608899ad24c5f181bdade919100ba1d3206d55a79f20c8dc0c32905b1729f80354da94f7916af86c98ebe4b21cc9b4c2",
}

# wrk2 (github.com/giltene/wrk2): the commit the path builds, the newest upstream (2019-09-23).
# tunepath applies its own patch (tunepath/live/wrk2-tunepath.patch) on every architecture.
WRK2_REPO = "https://github.com/giltene/wrk2.git"
WRK2_COMMIT = "44a94c17d8e6a0bac8559b53da76848e430cb7a7"
