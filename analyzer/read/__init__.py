"""Reading captures: flow files, HAR and stdio captures decoded into exchanges and their JSON-RPC
messages, in worker processes when that pays.
"""
