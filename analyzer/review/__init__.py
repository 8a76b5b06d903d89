"""What people read and gate on: the HTML report, the terminal and Markdown summaries, the CI check
and the before/after diff.
"""
