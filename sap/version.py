"""The version of sap: written into every record's meta and every run's fingerprint."""
__version__ = "0.2.0"
