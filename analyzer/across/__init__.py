"""Across calls: who sent each call, retries linked into groups, writes run twice, stable call ids,
and the stream that runs every stage in order.
"""
