"""What the scheduled measurement workflow (.github/workflows/measure-arm.yml) runs besides the path:
``tomcat_release`` finds the newest Tomcat 11 release and pins it in ``tunepath/versions.py``."""
