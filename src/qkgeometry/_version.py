"""The package version, in a leaf module: any module can read it without importing the package facade."""

__version__ = "0.1.0"
