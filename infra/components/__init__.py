"""One ComponentResource per concern: messaging, storage, function app, access, observability."""
