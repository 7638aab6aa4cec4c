"""The laptop environment: Azurite launcher, embedded Service Bus emulator, local Functions host."""
