"""Unit tests of the embedded Service Bus emulator."""
