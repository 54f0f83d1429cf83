"""The package version, in a leaf module: any module can read it without importing the package facade.

This is the one place the version is written: the package metadata reads it from here when the package is built.
"""

__version__ = "0.1.0"
