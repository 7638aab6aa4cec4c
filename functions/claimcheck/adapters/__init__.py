"""Thin adapters from the core's ports to the Azure SDKs. Each module imports its SDK itself."""
