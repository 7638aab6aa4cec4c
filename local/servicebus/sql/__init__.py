"""Service Bus SQL-92 subset: lexer, parser and evaluator behind `local.servicebus.filters`.

Private to the emulator; import the public names from `local.servicebus.filters`.
"""
