"""Service Bus SQL-92 subset: lexer, parser and evaluator behind `servicebus_emulator.filters`.

Private to the emulator; import the public names from `servicebus_emulator.filters`.
"""
