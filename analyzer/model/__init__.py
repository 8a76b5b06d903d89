"""The analysis's typed records and names: Exchange, Message, Call, the client identity, a stdio
server's session, and the vocabulary of outcomes, flags and origins. Above the wire formats only.
"""
