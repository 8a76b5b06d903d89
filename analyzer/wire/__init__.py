"""The wire and capture formats: what the recorders write and the analyzer reads.

JSON-RPC message reading, SSE framing, the flow file's records, the stdio capture format and the
names of capture files. The bottom layer: it imports nothing of the project.
"""
